//! Emulated network links: profiles and the relays that apply them.

mod profile;
mod relay;

pub use profile::{BUILT_IN, LinkProfile, parse_link};
pub use relay::Relay;

use std::net::{SocketAddr, ToSocketAddrs};

use anyhow::{Context, bail};

/// The TCP address a URL points at (its port, or the scheme's default).
fn socket_of(url: &reqwest::Url) -> anyhow::Result<SocketAddr> {
    let host = url
        .host_str()
        .filter(|h| !h.is_empty())
        .with_context(|| format!("{url} names no TCP host for a link relay"))?;
    let port = url
        .port_or_known_default()
        .or_else(|| matches!(url.scheme(), "postgres" | "postgresql").then_some(5432))
        .with_context(|| format!("{url} names no port"))?;
    (host.trim_matches(['[', ']']), port)
        .to_socket_addrs()
        .with_context(|| format!("resolving {host}:{port}"))?
        .next()
        .with_context(|| format!("{host}:{port} resolves to no address"))
}

/// Starts a relay for `url` through `profile` and returns it with the URL
/// rewritten to pass through it (same scheme, user, path and query).
pub(crate) fn relay_url(
    url: &str,
    profile: &LinkProfile,
    seed: u64,
) -> anyhow::Result<(Relay, String)> {
    let mut parsed = reqwest::Url::parse(url).with_context(|| format!("parsing {url}"))?;
    if parsed.scheme() == "https" {
        bail!("a link relay passes plain TCP; give the server as http://, not https://");
    }
    if parsed.query_pairs().any(|(k, _)| k == "host") {
        bail!("{url} names its host in the query (a Unix socket?); a link relay needs host:port");
    }
    let upstream = socket_of(&parsed)?;
    let relay = Relay::start(upstream, profile, seed)?;
    let address = relay.address();
    parsed
        .set_host(Some(&address.ip().to_string()))
        .map_err(|e| anyhow::anyhow!("rewriting {url}: {e}"))?;
    parsed
        .set_port(Some(address.port()))
        .map_err(|()| anyhow::anyhow!("rewriting the port of {url}"))?;
    Ok((relay, parsed.to_string().trim_end_matches('/').to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_rewritten_through_the_relay() {
        let profile = parse_link("rtt=1ms").unwrap();
        let (relay, url) = relay_url(
            "postgres://bench:pw@127.0.0.1:5999/db?sslmode=disable",
            &profile,
            1,
        )
        .unwrap();
        let port = relay.address().port();
        assert_eq!(
            url,
            format!("postgres://bench:pw@127.0.0.1:{port}/db?sslmode=disable")
        );
        let (relay, url) = relay_url("http://127.0.0.1:8080", &profile, 1).unwrap();
        assert_eq!(url, format!("http://127.0.0.1:{}", relay.address().port()));
        let err = relay_url("https://example.org", &profile, 1).unwrap_err();
        assert!(err.to_string().contains("plain TCP"), "{err}");
        let err = relay_url("postgres:///db?host=/run/postgresql", &profile, 1).unwrap_err();
        assert!(format!("{err:#}").contains("host"), "{err:#}");
    }

    /// The database link on real PostgreSQL: the server's version through
    /// the relay, and every query paying the link's round trip (a lower
    /// bound, which load cannot break; the upper bound is loose).
    #[test]
    fn postgres_answers_through_a_database_link() {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let Some(db) = runtime.block_on(mcq_testdb::postgres()) else {
            return;
        };
        let profile = parse_link("rtt=20ms").unwrap();
        let (_relay, url) = relay_url(&db.url, &profile, 7).unwrap();
        let version = crate::environment::backend_version(Some(&url)).unwrap();
        assert!(version.starts_with("PostgreSQL "), "{version}");
        runtime.block_on(async {
            use sqlx::Connection;
            let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
            let start = std::time::Instant::now();
            for _ in 0..5 {
                let one: i32 = sqlx::query_scalar("SELECT 1")
                    .fetch_one(&mut conn)
                    .await
                    .unwrap();
                assert_eq!(one, 1);
            }
            let per_query = start.elapsed().as_secs_f64() / 5.0;
            assert!(per_query >= 0.019, "{per_query} s per query");
            assert!(per_query < 1.0, "{per_query} s per query");
        });
    }
}
