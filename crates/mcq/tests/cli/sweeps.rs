//! `submit --sweep` and `results` against a real server: one row per grid
//! point, the id alone with `--quiet`, and results streamed as CSV, JSON
//! lines or a table.

use uuid::Uuid;

use super::server::Server;

#[test]
fn a_sweep_prints_one_row_per_grid_point_and_its_results_as_tables() {
    let server = Server::start();
    let (code, out, err) = server.run(&[
        "submit",
        "--runs",
        "1e4",
        "--sweep",
        "exercise=25:35:5",
        "--sweep",
        "periods=10,20",
        "--wait",
    ]);
    assert_eq!(code, Some(0), "{out}\n{err}");
    let lines: Vec<&str> = out.lines().collect();
    let id = lines[0].split(':').next().unwrap();
    assert!(Uuid::parse_str(id).is_ok(), "the id first: {out}");
    assert!(lines[0].contains("6 jobs queued"), "{out}");
    let header = lines
        .iter()
        .position(|l| l.starts_with("exercise"))
        .expect(&out);
    assert!(
        lines[header].contains("periods") && lines[header].contains("price"),
        "{out}"
    );
    let rows: Vec<Vec<&str>> = lines[header + 1..]
        .iter()
        .map(|l| l.split_whitespace().collect())
        .collect();
    let points: Vec<(&str, &str, &str)> = rows.iter().map(|r| (r[0], r[1], r[2])).collect();
    assert_eq!(
        points,
        [
            ("25", "10", "1/1"),
            ("25", "20", "1/1"),
            ("30", "10", "1/1"),
            ("30", "20", "1/1"),
            ("35", "10", "1/1"),
            ("35", "20", "1/1")
        ],
        "{out}"
    );

    let (code, csv, err) = server.run(&["results", id]);
    assert_eq!(code, Some(0), "{err}");
    let csv: Vec<&str> = csv.lines().collect();
    assert_eq!(csv.len(), 7, "{csv:?}");
    assert!(
        csv[0].starts_with("job_id,state,exercise,periods,price,"),
        "{}",
        csv[0]
    );
    // The table's price is the CSV's, rounded.
    let price: f64 = csv[3].split(',').nth(4).unwrap().parse().unwrap();
    assert_eq!(rows[2][3], format!("{price:.6}"));

    let (code, lines, _) = server.run(&[
        "results",
        id,
        "--format",
        "jsonl",
        "--fields",
        "exercise,price",
    ]);
    assert_eq!(code, Some(0));
    let first: serde_json::Value = serde_json::from_str(lines.lines().next().unwrap()).unwrap();
    assert_eq!(first["exercise"], 25);
    assert!(first["price"].as_f64().unwrap() > 0.0);

    let (code, table, _) = server.run(&[
        "results",
        id,
        "--format",
        "table",
        "--fields",
        "periods,state",
    ]);
    assert_eq!(code, Some(0));
    assert_eq!(table.lines().count(), 7, "{table}");
    assert!(table.lines().nth(1).unwrap().starts_with("10 "), "{table}");

    let (code, out, _) = server.run(&[
        "submit",
        "--sweep",
        "option=call,put",
        "--count",
        "2",
        "--quiet",
    ]);
    assert_eq!(code, Some(0));
    assert!(Uuid::parse_str(out.trim()).is_ok(), "only the id: {out:?}");

    let (code, _, err) = server.run(&["submit", "--sweep", "strike=1,2"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("/sweep/strike"), "{err}");
    let (code, _, err) = server.run(&["results", id, "--fields", "prise"]);
    assert_eq!(code, Some(2), "{err}");
    let (code, _, _) = server.run(&["submit", "--sweep", "exercise=3:1:1"]);
    assert_eq!(code, Some(2));
}
