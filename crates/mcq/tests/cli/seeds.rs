//! `submit --count N --seed S` against a real server: S is the batch's
//! base seed, so the N jobs price N streams, the same on every submission.

use mcq_kernel::job_seed;

use super::server::Server;

/// Submits `args` with `--wait --quiet`; the batch's (seed, price) rows.
fn submitted(server: &Server, args: &[&str]) -> Vec<(u64, String)> {
    let mut all = vec!["submit", "--wait", "--quiet"];
    all.extend_from_slice(args);
    let (code, out, err) = server.run(&all);
    assert_eq!(code, Some(0), "{out}\n{err}");
    let id = out.lines().next().expect("the batch id").trim().to_owned();
    let (code, csv, err) = server.run(&["results", &id, "--fields", "seed,price"]);
    assert_eq!(code, Some(0), "{err}");
    csv.lines()
        .skip(1)
        .map(|line| {
            let (seed, price) = line.split_once(',').expect(line);
            (seed.parse().expect(seed), price.to_owned())
        })
        .collect()
}

#[test]
fn copies_with_a_seed_price_distinct_streams_and_reproduce() {
    let server = Server::start();
    let args = ["--runs", "4000", "--count", "3", "--seed", "77"];
    let first = submitted(&server, &args);
    let seeds: Vec<u64> = first.iter().map(|(seed, _)| *seed).collect();
    assert_eq!(seeds, [job_seed(77, 0), job_seed(77, 1), job_seed(77, 2)]);
    assert!(
        first[0].1 != first[1].1 && first[1].1 != first[2].1,
        "three streams, three prices: {first:?}"
    );
    assert_eq!(submitted(&server, &args), first, "the same bits again");

    // A sweep with repeats takes the base seed the same way.
    let swept = submitted(
        &server,
        &[
            "--runs",
            "4000",
            "--sweep",
            "exercise=25,35",
            "--count",
            "2",
            "--seed",
            "77",
        ],
    );
    let seeds: Vec<u64> = swept.iter().map(|(seed, _)| *seed).collect();
    assert_eq!(seeds, (0..4).map(|i| job_seed(77, i)).collect::<Vec<_>>());

    // One job keeps the seed as given.
    let (code, out, err) = server.run(&["submit", "--runs", "4000", "--seed", "77", "--json"]);
    assert_eq!(code, Some(0), "{err}");
    let job: serde_json::Value = serde_json::from_str(&out).expect(&out);
    assert_eq!(job["spec"]["seed"], 77);

    let (code, _, err) = server.run(&["submit", "--seed", "9007199254740992"]);
    assert_eq!(
        code,
        Some(2),
        "a seed past 2^53 - 1 is a usage error: {err}"
    );
}
