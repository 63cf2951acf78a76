use super::*;

fn row(workers: usize, efficiency: f64) -> SizeRow {
    let ideal = workers as f64 * 20.0;
    SizeRow {
        workers,
        slots: 1,
        task_ms: 50.0,
        tasks: 100,
        ideal_per_s: ideal,
        throughput_per_s: ideal * efficiency,
        efficiency,
        span_ms: 1000.0,
        pickup_p50_ms: Some(1.0),
        pickup_p90_ms: Some(2.0),
        pickup_p99_ms: Some(3.0),
        pickup_samples: 90,
        visible_p50_ms: Some(1.5),
        visible_p99_ms: Some(4.0),
        visible_p99_low_ms: None,
        visible_p99_high_ms: None,
        visible_samples: 3,
        db_cpu_s: Some(1.0),
        db_cpu_per_task_us: Some(120.0),
        db_cores: Some(1.2),
        bench_cores: Some(0.5),
        other_cores: None,
        db_connections: 10,
        warm_up_db_ms_per_worker: Some(20.0),
        idle_jobs: 16,
        idle_pickup_p50_ms: Some(2.0),
        idle_pickup_p99_ms: Some(5.0),
        idle_db_ms_per_job: Some(3.0),
        refused: 0,
        contended: 0,
        floor_per_s: None,
        floor_efficiency: None,
        floor_db_cpu_per_task_us: None,
        floor_db_cores: None,
        floor_visible_p50_ms: None,
        floor_visible_p99_ms: None,
        floor_visible_p99_low_ms: None,
        floor_visible_p99_high_ms: None,
        floor_visible_samples: 0,
        db_cpu_ratio: None,
    }
}

/// With the machine's CPU measured, other processes' share decides
/// whether the CPU was spent and whether the run warns, not the load
/// average (which the run's own backends raise).
#[test]
fn other_processes_cpu_is_named_and_warned_of_past_a_quarter_of_the_cores() {
    let busy = SizeRow {
        other_cores: Some(0.9),
        db_cores: Some(0.6),
        bench_cores: Some(0.2),
        ..row(64, 0.5)
    };
    let s = saturation(std::slice::from_ref(&busy), 2, 40.0);
    assert!(
        s.explanation.contains("other processes 0.90") && s.explanation.contains("CPU is spent"),
        "{}",
        s.explanation
    );
    let warning = busy_warning(std::slice::from_ref(&busy), 2).expect("a warning");
    assert!(
        warning.contains("0.90") && warning.contains("64 workers"),
        "{warning}"
    );

    let quiet = SizeRow {
        other_cores: Some(0.1),
        db_cores: Some(0.5),
        bench_cores: Some(0.2),
        ..row(64, 0.5)
    };
    // A load of 40 from the run's own backends is not other work.
    let s = saturation(std::slice::from_ref(&quiet), 2, 40.0);
    assert!(
        s.explanation.contains("not spent") && !s.explanation.contains("other processes"),
        "{}",
        s.explanation
    );
    assert_eq!(busy_warning(&[quiet], 2), None);
    assert_eq!(
        busy_warning(&[row(64, 0.5)], 2),
        None,
        "unmeasured: the load decides"
    );
}

#[test]
fn saturation_is_the_first_size_below_ninety_percent() {
    let rows = [row(1, 0.99), row(4, 0.95), row(16, 0.8), row(64, 0.93)];
    let s = saturation(&rows, 2, 0.5);
    assert_eq!(s.keeps_up_to, Some(4));
    assert_eq!(s.first_below, Some(16));
    assert_eq!(s.peak_at, 64);
    assert!(
        s.explanation.contains("at 16 workers") && s.explanation.contains("CPU is spent"),
        "{}",
        s.explanation
    );
    let all = saturation(&[row(1, 0.99), row(2, 0.91)], 2, 0.5);
    assert_eq!((all.keeps_up_to, all.first_below), (Some(2), None));
    let none = saturation(&[row(1, 0.5)], 8, 0.5);
    assert_eq!(none.keeps_up_to, None);
    let busy = saturation(&[row(1, 0.5)], 2, 9.0);
    assert!(
        busy.explanation.contains("contention"),
        "{}",
        busy.explanation
    );
    assert!(
        none.explanation.contains("not spent"),
        "{}",
        none.explanation
    );
}

#[test]
fn sqlite_and_empty_sizes_are_refused_with_what_to_give() {
    let plan = ScalePlan {
        database_url: "sqlite://x.db".to_owned(),
        sizes: vec![1],
        slots: 1,
        task: Duration::from_millis(10),
        rounds: 2,
        pool_size: 2,
        link_db: LinkProfile::loopback(),
        seed: 1,
        fleet_url: None,
        pool_mode: PoolMode::Session,
        poll: Duration::from_secs(1),
        prefetch: mcq_worker::DEFAULT_PREFETCH_WINDOW,
        floor: true,
    };
    let dir = std::env::temp_dir();
    let err = scale(&plan, dir.clone(), &|_| {}).unwrap_err();
    assert!(err.to_string().contains("PostgreSQL"), "{err}");
    let plan = ScalePlan {
        database_url: "postgres://nowhere/db".to_owned(),
        sizes: vec![],
        ..plan
    };
    let err = scale(&plan, dir, &|_| {}).unwrap_err();
    assert!(err.to_string().contains("--workers"), "{err}");
}

/// A p99's interval, where the probes give its ends, holds it (but for 2
/// probes, whose larger is a lower end of its own).
fn assert_interval_holds(
    p99: f64,
    (low, high): (Option<f64>, Option<f64>),
    samples: usize,
    row: &SizeRow,
) {
    if samples != 2 {
        assert!(low.is_none_or(|low| low <= p99), "{row:?}");
    }
    assert!(high.is_none_or(|high| p99 <= high), "{row:?}");
}

/// The whole command on real PostgreSQL, small: two sizes of 10 ms tasks;
/// every file parses and agrees with the rows. No figure is asserted
/// beyond what holds on any machine (every task done, none refused).
#[test]
fn a_small_run_writes_files_that_parse() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let Some(db) = runtime.block_on(mcq_testdb::postgres()) else {
        return;
    };
    drop(runtime);
    let out = tempfile::tempdir().unwrap();
    std::fs::write(out.path().join(SCALE_CSV), "stale").unwrap();
    std::fs::write(out.path().join("notes.txt"), "kept").unwrap();
    let plan = ScalePlan {
        database_url: db.url.clone(),
        sizes: vec![1, 2],
        slots: 1,
        task: Duration::from_millis(10),
        rounds: 5,
        pool_size: 2,
        link_db: LinkProfile::loopback(),
        seed: 3,
        fleet_url: None,
        pool_mode: PoolMode::Session,
        poll: Duration::from_secs(1),
        prefetch: Duration::from_millis(150),
        floor: true,
    };
    let seen = std::sync::Mutex::new(Vec::new());
    let report = scale(&plan, out.path().to_path_buf(), &|row| {
        seen.lock().unwrap().push(row.workers);
    })
    .unwrap();
    assert_eq!(*seen.lock().unwrap(), [1, 2]);
    let rows = &report.summary.sizes;
    assert_eq!(rows.len(), 2);
    for (row, workers) in rows.iter().zip([1, 2]) {
        assert_eq!(row.workers, workers);
        assert_eq!(row.tasks, workers as u64 * 5);
        assert!(
            row.throughput_per_s > 0.0 && row.efficiency > 0.0,
            "{row:?}"
        );
        // A task holds its slot for 10 ms, so no slot can finish faster.
        assert!(row.efficiency <= 1.05, "{row:?}");
        assert_eq!(row.refused, 0);
        assert!(row.db_connections >= workers as u64, "{row:?}");
        assert!(row.pickup_p50_ms.is_some(), "{row:?}");
        // Gaps of the batch's tasks and the probe's only: not the
        // warm-up's, nor the idle fleet's single jobs. (A probe job in
        // flight at the end may or may not have started.)
        let most = row.tasks as usize + row.visible_samples + 1 - workers;
        assert!(
            (row.tasks as usize - workers..=most).contains(&row.pickup_samples),
            "{row:?}"
        );
        // The probe's first job goes in with the batch and is always seen.
        assert!(row.visible_samples >= 1, "{row:?}");
        let (p50, p99) = (row.visible_p50_ms.unwrap(), row.visible_p99_ms.unwrap());
        assert!((0.0..=p99).contains(&p50), "{row:?}");
        let interval = (row.visible_p99_low_ms, row.visible_p99_high_ms);
        assert_interval_holds(p99, interval, row.visible_samples, row);
        assert_eq!(
            row.visible_p99_low_ms.is_some(),
            crate::interval::quantile_ranks(row.visible_samples, 0.99, 0.95)
                .0
                .is_some(),
            "{row:?}"
        );
        // Then single jobs, one at a time, into the idle fleet.
        assert_eq!(row.idle_jobs, idle::JOBS, "{row:?}");
        let (p50, p99) = (
            row.idle_pickup_p50_ms.unwrap(),
            row.idle_pickup_p99_ms.unwrap(),
        );
        assert!((0.0..=p99).contains(&p50), "{row:?}");
        if row.db_cpu_per_task_us.is_some() {
            assert!(
                row.idle_db_ms_per_job.is_some_and(|ms| ms >= 0.0),
                "{row:?}"
            );
        }
        // The minimal queue ran beside it on the same database, its rows
        // all held for the same 10 ms, and the ratio is of the two CPUs.
        let floor = row.floor_efficiency.expect("the minimal queue ran");
        assert!(floor > 0.0 && floor <= 1.05, "{row:?}");
        // Its probe's first row goes in as its loops start and is heard.
        assert!(row.floor_visible_samples >= 1, "{row:?}");
        let (p50, p99) = (
            row.floor_visible_p50_ms.unwrap(),
            row.floor_visible_p99_ms.unwrap(),
        );
        assert!(p50 > 0.0 && p50 <= p99, "{row:?}");
        let interval = (row.floor_visible_p99_low_ms, row.floor_visible_p99_high_ms);
        assert_interval_holds(p99, interval, row.floor_visible_samples, row);
        if let (Some(m), Some(f)) = (row.db_cpu_per_task_us, row.floor_db_cpu_per_task_us)
            && f > 0.0
        {
            let ratio = row.db_cpu_ratio.expect("a ratio where both CPUs were read");
            assert!((ratio - m / f).abs() < 1e-9, "{row:?}");
        }
    }
    let csv_text = std::fs::read_to_string(out.path().join(SCALE_CSV)).unwrap();
    assert!(
        csv_text
            .lines()
            .next()
            .unwrap()
            .contains("floor_db_cpu_per_task_us"),
        "{csv_text}"
    );
    assert!(report.table.contains("floor µs/task"), "{}", report.table);
    assert!(report.table.contains("visible p99 ms"), "{}", report.table);
    assert!(
        report.table.contains("p99 95% interval"),
        "{}",
        report.table
    );
    assert!(
        report.table.contains("floor visible p99 ms"),
        "{}",
        report.table
    );
    assert!(report.table.contains("idle DB ms/job"), "{}", report.table);
    assert!(
        report.table.contains("warm-up DB ms/worker"),
        "{}",
        report.table
    );
    let (left, warm_ups): (bool, Vec<(String, i64, i64)>) = {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(async {
            use sqlx::Connection;
            let mut conn = sqlx::PgConnection::connect(&db.url).await.unwrap();
            let left = sqlx::query_scalar("SELECT to_regclass('mcq_bench_floor') IS NOT NULL")
                .fetch_one(&mut conn)
                .await
                .unwrap();
            let warm_ups = sqlx::query_as(
                "SELECT b.label, count(j.id), count(j.id) FILTER (WHERE j.state = 'succeeded')
                 FROM batches b JOIN jobs j ON j.batch_id = b.id
                 WHERE b.label LIKE '%warm-up' GROUP BY b.label ORDER BY b.label",
            )
            .fetch_all(&mut conn)
            .await
            .unwrap();
            (left, warm_ups)
        })
    };
    assert!(!left, "the minimal queue's table is dropped after the run");
    // Before each size's clock, two tasks per slot ran through its fleet.
    assert_eq!(
        warm_ups,
        [
            ("bench scale 1 warm-up".to_owned(), 2, 2),
            ("bench scale 2 warm-up".to_owned(), 4, 4)
        ]
    );
    for row in rows {
        if row.db_cpu_per_task_us.is_some() {
            assert!(
                row.warm_up_db_ms_per_worker.is_some_and(|ms| ms >= 0.0),
                "{row:?}"
            );
        }
    }
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join(SCALE_JSON)).unwrap())
            .unwrap();
    assert_eq!(json["sizes"].as_array().unwrap().len(), 2);
    assert_eq!(json["settings"]["task_ms"], 10.0);
    assert_eq!(json["settings"]["prefetch_ms"], 150.0);
    let mut reader = csv::Reader::from_path(out.path().join(SCALE_CSV)).unwrap();
    assert_eq!(reader.records().count(), 2, "the stale CSV is gone");
    let mut listed: Vec<String> = json["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap().to_owned())
        .collect();
    listed.sort();
    let mut present: Vec<String> = std::fs::read_dir(out.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n != "notes.txt")
        .collect();
    present.sort();
    assert_eq!(listed, present);
    assert!(
        out.path().join("notes.txt").exists(),
        "other files are kept"
    );
    let report_md = std::fs::read_to_string(out.path().join(crate::REPORT_MD)).unwrap();
    assert!(report_md.contains("| workers |") && report_md.contains(".svg"));
    assert!(report.table.contains("tasks/s"));
}

#[test]
fn the_bench_store_opens_a_connection_for_every_probe_job_in_flight_from_the_start() {
    let config = control_config();
    // The probe's reads, its listener and the batch's waiter.
    assert!(
        config.pool_size as usize >= visibility::IN_FLIGHT + 2,
        "{config:?}"
    );
    assert_eq!(config.pool_min, config.pool_size, "{config:?}");
}
