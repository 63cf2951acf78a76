//! The queue's conformance suite: every test is written once, as an async
//! function taking a [`harness::Db`], and instantiated below for SQLite,
//! for PostgreSQL, and for PostgreSQL with every batch staged. A backend
//! passes only if it passes all of them.

mod harness;

mod attempts;
mod claim_locks;
mod claim_plan;
mod claims;
mod jobs;
mod leases;
mod lifecycle;
mod overview;
mod phases;
mod races;
mod reads;
mod restart;
mod schema;
mod staged;
mod tenants;

/// Instantiates each listed test for both backends.
macro_rules! conformance {
    ($($module:ident :: $name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let db = crate::harness::Db::sqlite();
                    crate::$module::$name(&db).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let Some(db) = crate::harness::Db::postgres().await else { return };
                    crate::$module::$name(&db).await;
                }
            )*
        }
        /// PostgreSQL with every batch staged (`QueueConfig::stage_from`): the
        /// staged representation must behave exactly like written-out jobs.
        mod postgres_staged {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let Some(db) = crate::harness::Db::postgres_staged().await else { return };
                    crate::$module::$name(&db).await;
                }
            )*
        }
    };
}

conformance! {
    tenants::reads_and_cancels_stay_within_their_tenant,
    tenants::idempotency_keys_are_unique_per_tenant,
    tenants::keys_and_limits_are_stored,
    tenants::a_flood_does_not_delay_another_tenants_job,
    tenants::claims_share_equally_between_waiting_tenants,
    tenants::a_claim_gives_what_one_tenant_leaves_to_the_others,
    tenants::priority_orders_a_tenants_batches,
    tenants::racing_submissions_stay_within_the_quota,
    attempts::split_job_attempts_count_retries_not_claims,
    jobs::submit_creates_queued_jobs_and_tasks,
    jobs::a_page_reads_one_job_past_the_page_size,
    jobs::empty_submission_is_refused,
    jobs::idempotent_submit_replays_and_conflicts,
    jobs::idempotent_batch_replays_in_order,
    jobs::split_job_merges_bit_identical_to_one_process,
    jobs::single_task_job_result_matches_kernel,
    claims::concurrent_claimers_each_task_claimed_once,
    claims::small_claims_at_once_take_a_task_or_report_the_work_held,
    claims::claim_sets_running_token_attempt_and_start,
    claims::claims_ahead_take_at_most_half_of_the_rest,
    claims::claims_ahead_take_their_share_of_the_fleet,
    claims::a_claim_names_each_tasks_batch,
    claims::work_events_wake_on_submit,
    claims::a_signal_sent_between_waits_reaches_every_worker,
    claims::finishing_a_job_announces_its_batch,
    claims::every_finished_job_is_announced_once,
    claims::idle_announcements_reach_subscribers_and_wake_no_one,
    leases::expired_lease_is_requeued_and_claimed_again,
    leases::heartbeat_keeps_lease_alive,
    leases::late_completion_fail_and_release_are_refused,
    leases::release_hands_back_without_spending_an_attempt,
    leases::heartbeat_renews_only_presented_leases,
    leases::heartbeat_pairs_each_token_with_its_task,
    leases::lease_expiring_on_last_attempt_fails_the_job,
    leases::mixed_completion_records_only_live_leases,
    leases::completion_sent_with_a_claim_is_fenced_and_recorded,
    leases::workers_take_turns_to_reap,
    leases::a_heartbeat_offers_to_take_the_reaper_turn,
    lifecycle::failure_retries_after_backoff,
    lifecycle::last_attempt_fails_job_and_cancels_siblings,
    lifecycle::cancel_queued_job_leaves_queue,
    lifecycle::cancel_running_job_is_reported_by_heartbeat,
    lifecycle::cancel_finished_job_changes_nothing,
    lifecycle::cancel_batch_counts_unfinished_jobs,
    lifecycle::retention_prunes_only_old_finished_work,
    reads::batch_aggregates_equal_recomputation,
    reads::batch_jobs_pages_in_submission_order,
    reads::workers_are_listed_with_counters_until_deregistered,
    reads::an_idle_workers_counters_are_exact,
    overview::batches_are_listed_newest_first_filtered_and_paged,
    overview::queue_depth_counts_unfinished_tasks_by_state,
    overview::workers_show_state_held_tasks_and_throughput,
    overview::a_silent_worker_is_listed_as_lost,
    overview::recent_compute_reads_finished_jobs_within_its_bounds,
    schema::schema_status_follows_the_migrations,
    races::cancels_race_completions_without_errors,
    phases::a_single_job_records_its_phases_in_order,
    phases::a_split_job_spans_its_tasks,
    phases::a_retried_job_shows_the_attempt_that_succeeded,
    phases::a_completion_without_compute_times_still_records,
    phases::a_skewed_worker_clock_cannot_disorder_the_phases,
}
