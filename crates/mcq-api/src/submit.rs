//! `POST /v1/jobs` and `POST /v1/batches`: decode, fill defaults, validate
//! every spec (all or nothing), draw seeds, enqueue in bulk; or, with
//! `?dry_run=true`, answer what would be queued and what it would take
//! (see `dry_run`).

use axum::Extension;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use mcq_api_types::{
    BatchAccepted, BatchGrid, BatchRequest, DryRun, FieldProblem, IDEMPOTENT_REPLAYED, JobView,
    Problem,
};
use mcq_kernel::{MAX_SEED, Spec, ValidSpec};
use mcq_queue::{IdempotencyKey, Submission, Submitted, TenantLimits};

use crate::AppState;
use crate::access::Caller;
use crate::dry_run::{self, SubmitQuery};
use crate::extract::{IdempotencyHeader, JsonBody};
use crate::problem::ApiError;
use crate::sweep;

/// Largest batch priority (and, negated, the smallest).
const MAX_PRIORITY: i16 = 100;
/// Most characters of a batch label.
const MAX_LABEL_CHARS: usize = 200;
/// Most field errors listed in one problem; a batch of 100,000 bad specs
/// must not produce a response larger than the request.
const MAX_LISTED_ERRORS: usize = 100;

/// Enqueue one job.
#[utoipa::path(
    post,
    path = "/v1/jobs",
    tag = "jobs",
    request_body(content = Spec, description = "A pricing spec; omitted fields take the original sample's values"),
    params(
        ("Idempotency-Key" = Option<String>, Header, description = "Replays the original answer when repeated with the same body (a dry run neither reads nor stores it)"),
        ("dry_run" = Option<bool>, Query, description = "true: validate exactly as a submission, queue nothing, and answer 200 with what would be queued and the predicted compute and wall time on this server and on the live workers"),
        ("cost_local" = Option<String>, Query, description = "With dry_run=true and cost_cloud: price of a local core-hour, as `mcq bench compare --cost-local` (e.g. 0.04)"),
        ("cost_cloud" = Option<String>, Query, description = "With dry_run=true and cost_local: price of a cloud core-hour, optionally with its billing granularity, as `mcq bench compare --cost-cloud` (e.g. 0.05 or 0.05,granularity=1min; 1s, 1min or 1h, default 1s)"),
    ),
    responses(
        (status = 200, description = "Dry run: nothing was queued; what would be, and what it would take", body = DryRun),
        (status = 202, description = "Enqueued (or replayed); poll the Location", body = JobView,
            headers(("Location" = String, description = "URL of the job"))),
        (status = 400, description = "Malformed JSON, wrong types or unknown fields; a bad dry_run, cost_local or cost_cloud, or a price without dry_run=true or without the other price", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "Idempotency key reused with a different body", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body over the size limit; the detail names the limit and its value", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Body is not application/json", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid API key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "The key's role may not submit", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid values (or more paths than the tenant may run), each listed by JSON pointer", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "The tenant's quota of queued and running jobs is reached; see Retry-After", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Database unavailable or request timed out", body = Problem, content_type = "application/problem+json"),
    )
)]
pub(crate) async fn submit_job(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    IdempotencyHeader(key): IdempotencyHeader,
    query: Result<Query<SubmitQuery>, QueryRejection>,
    JsonBody(spec): JsonBody<Spec>,
) -> Result<Response, ApiError> {
    let dry = dry_run::asked(query)?;
    let spec = spec.with_defaults();
    let idempotency = key.map(|key| IdempotencyKey {
        key,
        fingerprint: fingerprint("POST /v1/jobs", &spec),
    });
    let spec = prepare(vec![spec], &caller.limits, |_, field| format!("/{field}"))?.remove(0);
    if let Some(asked) = dry {
        return dry_run::answer(&state, vec![spec], asked).await;
    }
    let submitted = state
        .store
        .submit_within(
            Submission {
                tenant: caller.tenant,
                priority: 0,
                as_batch: false,
                grid: None,
                label: None,
                jobs: vec![spec],
                idempotency,
            },
            caller.limits.max_active_jobs,
        )
        .await?;
    let id = *submitted.job_ids.first().ok_or(ApiError::Internal)?;
    let Some(view) = state.store.job(id, caller.scope()).await? else {
        tracing::error!(%id, "job missing right after submission");
        return Err(ApiError::Internal);
    };
    Ok(accepted(
        &format!("/v1/jobs/{id}"),
        &submitted,
        axum::Json(view),
    ))
}

/// Enqueue a batch of jobs, all or nothing.
#[utoipa::path(
    post,
    path = "/v1/batches",
    tag = "batches",
    request_body(content = BatchRequest, description = "Up to the server's limit of specs (100,000 by default)"),
    params(
        ("Idempotency-Key" = Option<String>, Header, description = "Replays the original answer when repeated with the same body (a dry run neither reads nor stores it)"),
        ("dry_run" = Option<bool>, Query, description = "true: validate exactly as a submission, queue nothing, and answer 200 with what would be queued and the predicted compute and wall time on this server and on the live workers"),
        ("cost_local" = Option<String>, Query, description = "With dry_run=true and cost_cloud: price of a local core-hour, as `mcq bench compare --cost-local` (e.g. 0.04)"),
        ("cost_cloud" = Option<String>, Query, description = "With dry_run=true and cost_local: price of a cloud core-hour, optionally with its billing granularity, as `mcq bench compare --cost-cloud` (e.g. 0.05 or 0.05,granularity=1min; 1s, 1min or 1h, default 1s)"),
    ),
    responses(
        (status = 200, description = "Dry run: nothing was queued; what would be, and what it would take", body = DryRun),
        (status = 202, description = "Enqueued (or replayed); job ids in submission order", body = BatchAccepted,
            headers(("Location" = String, description = "URL of the batch"))),
        (status = 400, description = "Malformed JSON, wrong types or unknown fields; a bad dry_run, cost_local or cost_cloud, or a price without dry_run=true or without the other price", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "Idempotency key reused with a different body", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body over the size limit (/problems/body-too-large) or more jobs than the job limit (/problems/batch-too-large); the detail names the limit and its value", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Body is not application/json", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid API key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "The key's role may not submit", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid values (or more paths than the tenant may run), each listed by JSON pointer such as /jobs/17/down", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "The tenant's quota of queued and running jobs is reached; see Retry-After", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Database unavailable or request timed out", body = Problem, content_type = "application/problem+json"),
    )
)]
pub(crate) async fn submit_batch(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    IdempotencyHeader(key): IdempotencyHeader,
    query: Result<Query<SubmitQuery>, QueryRejection>,
    JsonBody(request): JsonBody<BatchRequest>,
) -> Result<Response, ApiError> {
    let dry = dry_run::asked(query)?;
    check_label(request.label.as_deref())?;
    let priority = request.priority.unwrap_or(0);
    if !(-MAX_PRIORITY..=MAX_PRIORITY).contains(&priority) {
        return Err(invalid(vec![FieldProblem {
            pointer: "/priority".into(),
            detail: format!("priority must be from -{MAX_PRIORITY} to {MAX_PRIORITY}"),
        }]));
    }
    check_shape(&request)?;
    check_base_seed(&request)?;
    if let Some(sweep) = &request.sweep {
        sweep::job_count(
            sweep,
            request.repeat.unwrap_or(1),
            state.config.max_batch_jobs,
        )?;
    }
    // Validating (and expanding) tens of thousands of specs takes
    // milliseconds, but it is still CPU work: keep it off the async workers.
    let limits = caller.limits;
    let (label, grid, jobs, idempotency) = tokio::task::spawn_blocking(move || {
        let fingerprint = |request: &BatchRequest| fingerprint("POST /v1/batches", request);
        let Some(sweep) = request.sweep.clone() else {
            let request = BatchRequest {
                jobs: request.jobs.into_iter().map(Spec::with_defaults).collect(),
                ..request
            };
            let idempotency = key.map(|key| IdempotencyKey {
                fingerprint: fingerprint(&request),
                key,
            });
            let specs = with_job_seeds(request.jobs, request.seed);
            let jobs = prepare(specs, &limits, |i, field| format!("/jobs/{i}/{field}"))?;
            return Ok::<_, ApiError>((request.label, None, jobs, idempotency));
        };
        let idempotency = key.map(|key| IdempotencyKey {
            fingerprint: fingerprint(&request),
            key,
        });
        let base = request.spec.unwrap_or_default();
        let repeat = request.repeat.unwrap_or(1);
        sweep::check(&base, &sweep, repeat).map_err(invalid)?;
        let grid = BatchGrid { sweep, repeat };
        let specs = with_job_seeds(sweep::expand(&base, &grid)?, request.seed);
        let jobs = prepare(specs, &limits, |i, field| sweep::pointer(&grid, i, field))?;
        Ok((request.label, Some(grid), jobs, idempotency))
    })
    .await
    .map_err(|_| ApiError::Internal)??;
    if let Some(asked) = dry {
        return dry_run::answer(&state, jobs, asked).await;
    }
    // The quota is counted with the insert, so racing submissions cannot
    // pass it together.
    let submitted = state
        .store
        .submit_within(
            Submission {
                tenant: caller.tenant,
                priority,
                as_batch: true,
                grid,
                label,
                jobs,
                idempotency,
            },
            caller.limits.max_active_jobs,
        )
        .await?;
    let Some(id) = submitted.batch_id else {
        tracing::error!("batch submission returned no batch id");
        return Err(ApiError::Internal);
    };
    let body = BatchAccepted {
        id,
        job_ids: submitted.job_ids.clone(),
    };
    Ok(accepted(
        &format!("/v1/batches/{id}"),
        &submitted,
        axum::Json(body),
    ))
}

/// A batch gives its jobs, or a sweep (with its base spec and repeat
/// count), not both, and not nothing.
fn check_shape(request: &BatchRequest) -> Result<(), ApiError> {
    let problem = |pointer: &str, detail: &str| {
        Err(invalid(vec![FieldProblem {
            pointer: pointer.into(),
            detail: detail.into(),
        }]))
    };
    match (&request.sweep, request.jobs.is_empty()) {
        (Some(_), false) => problem(
            "/jobs",
            "give either jobs or a sweep (with its base spec), not both",
        ),
        (None, _) if request.spec.is_some() => problem(
            "/spec",
            "spec is the base of a sweep: give sweep too, or list the spec in jobs",
        ),
        (None, _) if request.repeat.is_some() => problem(
            "/repeat",
            "repeat applies to a sweep's grid points: give sweep too, or list the jobs",
        ),
        (None, true) => problem("/jobs", "a batch needs at least one job"),
        _ => Ok(()),
    }
}

/// A base seed is a seed (at most [`MAX_SEED`]), and a sweep takes its
/// jobs' seeds from one place: the base seed, the base spec's seed, or a
/// `seed` axis.
fn check_base_seed(request: &BatchRequest) -> Result<(), ApiError> {
    let Some(base) = request.seed else {
        return Ok(());
    };
    let detail = if base > MAX_SEED {
        format!("seed must be at most 2^53 - 1 = {MAX_SEED} (got {base})")
    } else if request
        .spec
        .as_ref()
        .is_some_and(|spec| spec.seed.is_some())
    {
        "give the batch's base seed or the base spec's seed, not both".into()
    } else if request
        .sweep
        .as_ref()
        .is_some_and(|sweep| sweep.fields().any(|field| field == "seed"))
    {
        "give the batch's base seed or sweep over seed, not both".into()
    } else {
        return Ok(());
    };
    Err(invalid(vec![FieldProblem {
        pointer: "/seed".into(),
        detail,
    }]))
}

/// The specs with the seeds a base seed gives them: job `i` without a seed
/// of its own gets [`mcq_kernel::job_seed`]`(base, i)`.
fn with_job_seeds(mut specs: Vec<Spec>, base: Option<u64>) -> Vec<Spec> {
    if let Some(base) = base {
        for (index, spec) in (0u64..).zip(specs.iter_mut()) {
            spec.seed
                .get_or_insert_with(|| mcq_kernel::job_seed(base, index));
        }
    }
    specs
}

/// The label's rules: at most [`MAX_LABEL_CHARS`] characters, no U+0000
/// (PostgreSQL cannot store it in text, and every backend must answer alike).
fn check_label(label: Option<&str>) -> Result<(), ApiError> {
    let Some(label) = label else {
        return Ok(());
    };
    let detail = if label.chars().count() > MAX_LABEL_CHARS {
        format!("label must be at most {MAX_LABEL_CHARS} characters")
    } else if let Some(detail) = text_problem(label) {
        format!("label {detail}")
    } else {
        return Ok(());
    };
    Err(invalid(vec![FieldProblem {
        pointer: "/label".into(),
        detail,
    }]))
}

/// What no stored text may hold, whatever the field: U+0000, which
/// PostgreSQL refuses in `text` and `jsonb` while SQLite keeps it.
fn text_problem(text: &str) -> Option<&'static str> {
    text.contains('\0')
        .then_some("must not contain the character U+0000 (NUL)")
}

/// The tenant's limit of paths per job against one spec: a refusal with
/// the field it names, if the spec asks for more.
fn over_path_limit(spec: &Spec, limits: &TenantLimits) -> Option<(&'static str, String)> {
    let max = limits.max_paths_per_job?;
    if spec.method == mcq_kernel::Method::Exact {
        return None;
    }
    match spec.runs {
        Some(runs) if runs > max => Some((
            "runs",
            format!("runs ({runs}) is above this tenant's limit of {max} paths per job"),
        )),
        Some(_) => None,
        // A target error may need any number of paths: only `runs` can
        // promise to stay within the limit.
        None => Some((
            "target_std_error",
            format!(
                "this tenant may run at most {max} paths per job: give `runs` instead of `target_std_error`"
            ),
        )),
    }
}

/// Validates every spec (defaults already filled) and holds it to the
/// tenant's path limit; the kernel draws the missing seeds, so that every
/// task of a job uses the same stream and the stored spec says which.
/// `pointer(i, field)` is the JSON pointer of `field` of spec `i`.
fn prepare(
    specs: Vec<Spec>,
    limits: &TenantLimits,
    pointer: impl Fn(usize, &str) -> String,
) -> Result<Vec<ValidSpec>, ApiError> {
    let mut errors = Vec::new();
    let mut ready = Vec::with_capacity(specs.len());
    for (i, spec) in specs.iter().enumerate() {
        if let Some(seed) = spec.seed.filter(|&seed| seed > MAX_SEED) {
            errors.push(FieldProblem {
                pointer: pointer(i, "seed"),
                detail: format!("seed must be at most 2^53 - 1 = {MAX_SEED} (got {seed})"),
            });
            continue;
        }
        if let Some((field, detail)) = over_path_limit(spec, limits) {
            errors.push(FieldProblem {
                pointer: pointer(i, field),
                detail,
            });
            continue;
        }
        match spec.validate() {
            Ok(valid) => ready.push(valid),
            Err(problems) => errors.extend(problems.into_iter().map(|p| FieldProblem {
                pointer: pointer(i, p.field()),
                detail: p.to_string(),
            })),
        }
    }
    let errors = sweep::dedup(errors);
    if errors.is_empty() {
        Ok(ready)
    } else {
        Err(invalid(errors))
    }
}

fn invalid(mut errors: Vec<FieldProblem>) -> ApiError {
    let total = errors.len();
    errors.truncate(MAX_LISTED_ERRORS);
    let detail = if total > errors.len() {
        format!(
            "{total} invalid values; the first {} are listed; nothing was enqueued",
            errors.len()
        )
    } else {
        format!(
            "{total} invalid value{}; nothing was enqueued",
            if total == 1 { "" } else { "s" }
        )
    };
    ApiError::InvalidSpec { detail, errors }
}

/// A canonical, stable digest of what was asked (route and decoded body,
/// defaults filled, before seeds are drawn): the same request sent twice
/// has the same fingerprint whatever its whitespace or field order.
fn fingerprint(route: &str, body: &impl serde::Serialize) -> String {
    let json = serde_json::to_vec(body).unwrap_or_default();
    // FNV-1a, 128 bits: stable across releases and platforms (std's
    // hashers promise neither), and collisions are not a security concern
    // for a key the client itself chooses.
    let mut hash: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    for byte in route.as_bytes().iter().chain(b"\n").chain(&json) {
        hash ^= u128::from(*byte);
        hash = hash.wrapping_mul(0x0000_0000_0100_0000_0000_0000_0000_013b);
    }
    format!("{route} fnv1a128:{hash:032x}")
}

fn accepted(location: &str, submitted: &Submitted, body: impl IntoResponse) -> Response {
    let mut response = (StatusCode::ACCEPTED, body).into_response();
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(location) {
        headers.insert(header::LOCATION, value);
    }
    if submitted.replayed {
        headers.insert(IDEMPOTENT_REPLAYED, HeaderValue::from_static("true"));
    } else {
        metrics::counter!(mcq_metrics::JOBS_SUBMITTED).increment(submitted.job_ids.len() as u64);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprint_ignores_formatting_but_not_content() {
        let a: Spec = serde_json::from_str(r#"{"up": 1.5, "down": 0.7}"#).unwrap();
        let b: Spec = serde_json::from_str("{ \"down\":0.7,\n \"up\":1.5 }").unwrap();
        let c: Spec = serde_json::from_str(r#"{"up": 1.5, "down": 0.75}"#).unwrap();
        let f = |s: &Spec| fingerprint("POST /v1/jobs", &s.clone().with_defaults());
        assert_eq!(f(&a), f(&b));
        assert_ne!(f(&a), f(&c));
        assert_ne!(
            fingerprint("POST /v1/jobs", &a),
            fingerprint("POST /v1/batches", &a)
        );
    }

    #[test]
    fn prepare_draws_seeds_and_points_at_every_bad_field() {
        let good = Spec::default().with_defaults();
        let bad = Spec {
            down: 2.0,
            periods: 0,
            ..Spec::default()
        }
        .with_defaults();
        let ready = prepare(vec![good.clone()], &TenantLimits::default(), |_, f| {
            format!("/{f}")
        })
        .unwrap();
        assert!(ready[0].spec().seed.is_some());
        let Err(ApiError::InvalidSpec { errors, .. }) =
            prepare(vec![good, bad], &TenantLimits::default(), |i, f| {
                format!("/jobs/{i}/{f}")
            })
        else {
            panic!("a bad spec must reject the batch");
        };
        let pointers: Vec<&str> = errors.iter().map(|e| e.pointer.as_str()).collect();
        assert!(pointers.contains(&"/jobs/1/down"), "{pointers:?}");
        assert!(pointers.contains(&"/jobs/1/periods"), "{pointers:?}");
        assert!(
            pointers.iter().all(|p| p.starts_with("/jobs/1/")),
            "{pointers:?}"
        );
    }

    #[test]
    fn prepare_keeps_given_seeds_and_draws_missing_ones() {
        let spec = |seed, down| Spec {
            seed,
            down,
            ..Spec::default().with_defaults()
        };
        let ready = prepare(
            vec![spec(Some(1), 0.8), spec(Some(2), 0.8), spec(None, 0.8)],
            &TenantLimits::default(),
            |i, f| format!("/jobs/{i}/{f}"),
        )
        .unwrap();
        assert_eq!(ready[0].spec().seed, Some(1));
        assert_eq!(ready[1].spec().seed, Some(2));
        assert!(ready[2].spec().seed.is_some(), "a missing seed is drawn");
        // Every spec is validated, however alike the ones before it.
        let Err(ApiError::InvalidSpec { errors, .. }) = prepare(
            vec![spec(Some(1), 0.8), spec(Some(2), 0.8), spec(Some(3), 2.0)],
            &TenantLimits::default(),
            |i, f| format!("/jobs/{i}/{f}"),
        ) else {
            panic!("the bad third spec must reject the batch");
        };
        let pointers: Vec<&str> = errors.iter().map(|e| e.pointer.as_str()).collect();
        assert_eq!(pointers, ["/jobs/2/down"]);
    }
}
