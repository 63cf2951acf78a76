//! A TCP relay in the benchmark process that makes a loopback connection
//! behave like a longer link: no kernel feature (`netem`) needed.
//!
//! The model, per connection and per direction: every chunk the relay
//! reads (up to 16 KiB, what one `read` returns) is
//! - paced: it leaves no earlier than the previous chunk's departure plus
//!   its own transmission time at the profile's rate (a token bucket with
//!   a one-chunk burst);
//! - delayed: by RTT/2 plus a jitter drawn from Normal(0, jitter/√2) (two
//!   directions make a round trip whose standard deviation is `jitter`),
//!   the sum clamped at zero;
//! - lost, with probability `loss`: TCP never loses data, it retransmits,
//!   so a lost chunk arrives one retransmission timeout late,
//!   RTO = max(200 ms, RTT + 4·jitter) (Linux's minimum RTO and the
//!   RFC 6298 form), and holds back every chunk behind it;
//! - kept in order: a chunk never overtakes the one before it, as on TCP.
//!
//! Each direction of connection k draws from its own generator seeded by
//! (seed, k, direction), so a run is repeatable for a seed.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use rand::SeedableRng;
use rand::rngs::Xoshiro256PlusPlus;
use rand_distr::{Bernoulli, Distribution, Normal};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::profile::LinkProfile;

/// Largest chunk read at once.
const CHUNK: usize = 16 * 1024;

/// Linux's minimum retransmission timeout.
const MIN_RTO: Duration = Duration::from_millis(200);

/// A running relay; stops (and drops its connections) when dropped.
#[derive(Debug)]
pub struct Relay {
    address: SocketAddr,
    // Dropping the runtime ends every task of the relay.
    _runtime: tokio::runtime::Runtime,
}

impl Relay {
    /// Starts a relay on 127.0.0.1 (a free port) forwarding every
    /// connection to `upstream` through `profile`, on its own thread so it
    /// keeps forwarding whatever the caller's threads do.
    pub fn start(upstream: SocketAddr, profile: &LinkProfile, seed: u64) -> anyhow::Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("mcq-bench-relay")
            .enable_all()
            .build()
            .context("building the relay's runtime")?;
        let listener = runtime
            .block_on(TcpListener::bind("127.0.0.1:0"))
            .context("binding the relay")?;
        let address = listener.local_addr().context("the relay's address")?;
        let profile = profile.clone();
        runtime.spawn(async move {
            let mut index: u64 = 0;
            while let Ok((client, _)) = listener.accept().await {
                index += 1;
                let profile = profile.clone();
                tokio::spawn(async move {
                    // A refused upstream closes the client's connection,
                    // which the client reports as the server would.
                    if let Ok(server) = TcpStream::connect(upstream).await {
                        relay_connection(client, server, &profile, seed, index);
                    }
                });
            }
        });
        Ok(Self {
            address,
            _runtime: runtime,
        })
    }

    /// Where clients connect instead of the upstream.
    pub fn address(&self) -> SocketAddr {
        self.address
    }
}

fn relay_connection(
    client: TcpStream,
    server: TcpStream,
    profile: &LinkProfile,
    seed: u64,
    index: u64,
) {
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let stream = |direction: u64| {
        let mixed = seed ^ index.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (direction << 62);
        Shaper::new(profile, Xoshiro256PlusPlus::seed_from_u64(mixed))
    };
    spawn_direction(client_read, server_write, stream(0));
    spawn_direction(server_read, client_write, stream(1));
}

/// When each chunk of one direction may leave.
#[derive(Debug)]
pub(crate) struct Shaper {
    half_rtt: f64,
    jitter: Option<Normal<f64>>,
    loss: Option<Bernoulli>,
    rto: f64,
    seconds_per_byte: f64,
    /// When the pacer is free again (seconds from the direction's start).
    pacer_free: f64,
    /// Departure of the previous chunk.
    last_departure: f64,
    rng: Xoshiro256PlusPlus,
}

impl Shaper {
    pub(crate) fn new(profile: &LinkProfile, rng: Xoshiro256PlusPlus) -> Self {
        let rtt = profile.rtt.as_secs_f64();
        let jitter = profile.jitter.as_secs_f64();
        Self {
            half_rtt: rtt / 2.0,
            jitter: (jitter > 0.0)
                .then(|| Normal::new(0.0, jitter / std::f64::consts::SQRT_2).ok())
                .flatten(),
            loss: (profile.loss > 0.0)
                .then(|| Bernoulli::new(profile.loss).ok())
                .flatten(),
            rto: MIN_RTO.as_secs_f64().max(rtt + 4.0 * jitter),
            seconds_per_byte: profile.rate_bits_per_s.map_or(0.0, |r| 8.0 / r),
            pacer_free: 0.0,
            last_departure: 0.0,
            rng,
        }
    }

    /// Departure time (seconds from the direction's start) of `bytes`
    /// read at `arrival`.
    pub(crate) fn departure(&mut self, arrival: f64, bytes: usize) -> f64 {
        let sent = self.pacer_free.max(arrival) + bytes as f64 * self.seconds_per_byte;
        self.pacer_free = sent;
        let noise = self.jitter.map_or(0.0, |n| n.sample(&mut self.rng));
        let mut delay = (self.half_rtt + noise).max(0.0);
        if self.loss.is_some_and(|l| l.sample(&mut self.rng)) {
            delay += self.rto;
        }
        let departure = (sent + delay).max(self.last_departure);
        self.last_departure = departure;
        departure
    }
}

fn spawn_direction(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, mut shaper: Shaper) {
    // Bounded, so a slow link pushes back on the sender as TCP would.
    let (tx, mut rx) = mpsc::channel::<(Instant, Vec<u8>)>(256);
    tokio::spawn(async move {
        let start = Instant::now();
        let mut buf = vec![0u8; CHUNK];
        loop {
            let n = match from.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let arrival = start.elapsed().as_secs_f64();
            let due = start + Duration::from_secs_f64(shaper.departure(arrival, n));
            if tx.send((due, buf[..n].to_vec())).await.is_err() {
                break;
            }
        }
    });
    tokio::spawn(async move {
        while let Some((due, bytes)) = rx.recv().await {
            tokio::time::sleep_until(due).await;
            if to.write_all(&bytes).await.is_err() {
                return;
            }
        }
        // The sender closed its side: pass the close on once the data is out.
        let _ = to.shutdown().await;
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::parse_link;

    fn shaper(text: &str, seed: u64) -> Shaper {
        Shaper::new(
            &parse_link(text).unwrap(),
            Xoshiro256PlusPlus::seed_from_u64(seed),
        )
    }

    #[test]
    fn the_shaper_delays_paces_and_keeps_order() {
        // 8 mbit/s is 1 byte per µs: 1000 bytes take 1 ms, then 10 ms of delay.
        let mut s = shaper("rtt=20ms,rate=8mbit", 1);
        assert!((s.departure(0.0, 1000) - 0.011).abs() < 1e-12);
        // Sent at once behind it: paced after the first.
        assert!((s.departure(0.0, 1000) - 0.012).abs() < 1e-12);
        // Jitter never reorders and is the same for the same seed.
        let times = |seed| {
            let mut s = shaper("rtt=10ms,jitter=5ms", seed);
            (0..200)
                .map(|i| s.departure(f64::from(i) * 1e-4, 10))
                .collect::<Vec<_>>()
        };
        let a = times(3);
        assert_eq!(a, times(3));
        assert_ne!(a, times(4));
        assert!(a.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn jitter_and_loss_follow_the_stated_distributions() {
        // One-way delays of chunks far apart: mean RTT/2, sd jitter/√2.
        let mut s = shaper("rtt=10ms,jitter=2ms", 9);
        let delays: Vec<f64> = (0..20_000)
            .map(|i| {
                let t = f64::from(i);
                s.departure(t, 1) - t
            })
            .collect();
        let mean = crate::stats::mean(&delays);
        let sd = crate::stats::stddev(&delays);
        assert!((mean - 0.005).abs() < 5e-5, "{mean}");
        assert!((sd - 0.002 / std::f64::consts::SQRT_2).abs() < 5e-5, "{sd}");
        // 10% loss: about one chunk in ten is a retransmission (200 ms) late.
        let mut s = shaper("loss=10%", 5);
        let late = (0..10_000)
            .filter(|&i| {
                let t = f64::from(i);
                s.departure(t, 1) - t > 0.1
            })
            .count();
        assert!((900..1100).contains(&late), "{late}");
    }

    /// An echo server on loopback.
    async fn echo() -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let (mut r, mut w) = conn.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        });
        address
    }

    /// The relay's fidelity on real sockets. Wall-clock bounds here are
    /// one-sided where it matters: the lower bounds are tight (a relay
    /// can never be faster than its profile, and the test fails if it is),
    /// the upper bounds loose (a loaded machine only adds time, so they
    /// catch a relay that adds far too much without flaking).
    #[test]
    fn a_relay_adds_its_rtt_and_paces_to_its_rate() {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let upstream = runtime.block_on(echo());
        let profile = parse_link("rtt=30ms,rate=8mbit").unwrap();
        let relay = Relay::start(upstream, &profile, 1).unwrap();
        runtime.block_on(async {
            let mut conn = TcpStream::connect(relay.address()).await.unwrap();
            conn.set_nodelay(true).unwrap();
            let mut rtts = Vec::new();
            let mut byte = [0u8; 1];
            for i in 0..10u8 {
                let t = Instant::now();
                conn.write_all(&[i]).await.unwrap();
                conn.read_exact(&mut byte).await.unwrap();
                assert_eq!(byte[0], i);
                rtts.push(t.elapsed().as_secs_f64());
            }
            let median = crate::stats::median(&rtts);
            // Added: 30 ms. Tight below (1 ms for timer rounding), loose above.
            assert!(median >= 0.029, "median RTT {median}");
            assert!(median < 0.5, "median RTT {median}");

            // 200 kB each way at 1 MB/s: at least 0.2 s less one chunk's time.
            let payload = vec![7u8; 200_000];
            let t = Instant::now();
            let (mut r, mut w) = conn.into_split();
            let writer = tokio::spawn(async move {
                w.write_all(&payload).await.unwrap();
                w
            });
            let mut back = vec![0u8; 200_000];
            r.read_exact(&mut back).await.unwrap();
            let elapsed = t.elapsed().as_secs_f64();
            let _ = writer.await.unwrap();
            assert!(back.iter().all(|&b| b == 7));
            let floor = (200_000 - CHUNK) as f64 / 1e6;
            assert!(elapsed >= floor, "200 kB took {elapsed} s, below {floor} s");
            assert!(elapsed < 10.0, "200 kB took {elapsed} s");
        });
    }
}
