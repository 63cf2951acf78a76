//! Handler tests: the real router (`app().oneshot`) over real SQLite files
//! and real PostgreSQL databases. Every case runs on both backends.

mod bad_input;
mod connections;
mod dashboard;
mod endpoints;
mod harness;
mod hostile;
mod long_poll;
mod metrics;
mod openapi;
mod outage;
mod overview;
mod seeds;
mod sweeps;
mod tenants;

/// Declares `<name>_sqlite` and `<name>_postgres` tests running `case`.
#[macro_export]
macro_rules! on_both {
    ($name:ident, $case:ident) => {
        mod $name {
            #[tokio::test]
            async fn sqlite() {
                let t = $crate::harness::TestApp::sqlite().await;
                super::$case(&t).await;
            }

            #[tokio::test]
            async fn postgres() {
                let Some(t) = $crate::harness::TestApp::postgres().await else {
                    return;
                };
                super::$case(&t).await;
            }
        }
    };
}
