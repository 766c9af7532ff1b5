//! Limits that count by outcome end to end (issue 40 §2): a real axum server on 127.0.0.1, a
//! real hyper client over TCP, time from a `ManualClock`. A policy with
//! `Policy::charge_when` charges only the responses that match (failed logins: the fail2ban
//! pattern), refuses a client over its budget before its handler runs, and reports the quota
//! after the refund of a response it does not charge.
#![cfg(feature = "axum")]

use std::sync::Arc;
use std::time::Duration;

use axum::routing::post;
use axum::Router;
use http::{HeaderMap, StatusCode};
use tollgate::http::{BuildError, Endpoint, KeyBy, Policy, RateLimiting};
use tollgate::{ConcurrencyOptions, ManualClock};

mod http_support;
use http_support::{
    every_rate_algorithm, fixed, forwarded_client_ip, serve_limited, Calls, Got, HttpClient,
};

/// Failed logins: a 401 or a 403 counts.
fn failed(r: &http::response::Parts) -> bool {
    r.status == StatusCode::UNAUTHORIZED || r.status == StatusCode::FORBIDDEN
}

/// `POST /login`: 200 for the right password, 401 otherwise; counts its calls.
fn login_app(calls: &Calls) -> Router {
    let calls = calls.clone();
    Router::new().route(
        "/login",
        post(move |headers: HeaderMap| {
            let calls = calls.clone();
            async move {
                calls.hit();
                if headers.get("password").is_some_and(|p| p == "right") {
                    (StatusCode::OK, "welcome")
                } else {
                    (StatusCode::UNAUTHORIZED, "no")
                }
            }
        }),
    )
}

/// `POST /login` from client `ip` with `password`, read to its end.
async fn login(c: &HttpClient, addr: std::net::SocketAddr, ip: &str, password: &str) -> Got {
    http_support::request_with(
        c,
        addr,
        http::Method::POST,
        "/login",
        &[("x-forwarded-for", ip), ("password", password)],
    )
    .await
}

/// The fail2ban pattern on `/login`, per client IP: successes are never counted; three
/// failures and the client is refused before the handler runs (its counter does not move),
/// even with the right password; another client is untouched; the window's end forgives.
#[tokio::test]
async fn three_failed_logins_and_the_client_is_refused_before_the_handler() {
    let clock = Arc::new(ManualClock::new());
    let limits = RateLimiting::builder()
        .policy(
            "login",
            fixed(3, 900)
                .partition_by(KeyBy::CLIENT_IP)
                .charge_when(failed),
        )
        .select(|req| match req.uri.path() {
            "/login" => Endpoint::Policy("login"),
            _ => Endpoint::Default,
        })
        .client_ip(forwarded_client_ip())
        .rate_limit_headers(true)
        .clock(clock.clone())
        .build()
        .unwrap();
    let calls = Calls::default();
    let (addr, c) = serve_limited(&limits, login_app(&calls)).await;
    let (a, b) = ("203.0.113.1", "203.0.113.2");

    // Successes cost nothing: the quota after each is the whole budget.
    for _ in 0..5 {
        let got = login(&c, addr, a, "right").await;
        assert_eq!(got.status, StatusCode::OK);
        assert_eq!(got.header("ratelimit"), Some(r#""login";r=3"#)); // nothing counted
    }
    // Three failures are charged, and the headers say so.
    for left in [2, 1, 0] {
        let got = login(&c, addr, a, "wrong").await;
        assert_eq!(got.status, StatusCode::UNAUTHORIZED);
        let expected = format!(r#""login";r={left};t=900"#);
        assert_eq!(got.header("ratelimit"), Some(expected.as_str()));
    }
    assert_eq!(calls.get(), 8);

    // Over budget: refused before the handler, whatever the password.
    for password in ["wrong", "right"] {
        let got = login(&c, addr, a, password).await;
        assert_eq!(got.status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(got.header("retry-after"), Some("900"));
    }
    assert_eq!(calls.get(), 8, "a refused login must not reach the handler");

    // Another client's budget is its own.
    assert_eq!(
        login(&c, addr, b, "wrong").await.status,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(login(&c, addr, b, "right").await.status, StatusCode::OK);
    assert_eq!(calls.get(), 10);

    // The window ends: the first client may try again.
    clock.advance(Duration::from_secs(900));
    assert_eq!(login(&c, addr, a, "right").await.status, StatusCode::OK);
}

/// Every rate algorithm, global and per key: a success is refunded exactly (a client's
/// budget of failures is the same after any number of successes as before them), the budget
/// is spent by failures only, and a refused request never reaches the handler.
#[tokio::test]
async fn successes_are_refunded_exactly_on_every_rate_algorithm_global_and_keyed() {
    for keyed in [false, true] {
        for i in 0..every_rate_algorithm(3).len() {
            let fresh = failure_budget(i, keyed, 0).await;
            let (name, after_successes) = failure_budget(i, keyed, 6).await;
            assert!(fresh.1 >= 1, "{name}: no budget at all");
            assert_eq!(after_successes, fresh.1, "{name} (keyed: {keyed})");
        }
    }
}

/// The budget of failures of algorithm `i` (of `every_rate_algorithm(3)`, global or keyed by
/// client IP) after `successes` successes, on a layer of its own; a refused request must not
/// reach the handler.
async fn failure_budget(i: usize, keyed: bool, successes: usize) -> (&'static str, usize) {
    let (name, policy) = every_rate_algorithm(3).swap_remove(i);
    let policy = if keyed {
        policy.partition_by(KeyBy::CLIENT_IP)
    } else {
        policy
    };
    let limits = RateLimiting::builder()
        .global(policy.charge_when(failed))
        .client_ip(forwarded_client_ip())
        .clock(ManualClock::new())
        .build()
        .unwrap();
    let calls = Calls::default();
    let (addr, c) = serve_limited(&limits, login_app(&calls)).await;
    let ip = "203.0.113.1";
    for _ in 0..successes {
        assert_eq!(
            login(&c, addr, ip, "right").await.status,
            StatusCode::OK,
            "{name}"
        );
    }
    let mut failures = 0;
    loop {
        let before = calls.get();
        let got = login(&c, addr, ip, "wrong").await;
        if got.status == StatusCode::TOO_MANY_REQUESTS {
            assert_eq!(calls.get(), before, "{name}: refused after the handler");
            return (name, failures);
        }
        assert_eq!(got.status, StatusCode::UNAUTHORIZED, "{name}");
        failures += 1;
        assert!(failures <= 10, "{name}: failures never refused");
    }
}

/// A shadow outcome policy records what it would refuse and refuses nothing.
#[tokio::test]
async fn a_shadow_outcome_policy_records_and_never_refuses() {
    let limits = RateLimiting::builder()
        .policy("login", fixed(1, 900).charge_when(failed).shadow())
        .select(|_| Endpoint::Policy("login"))
        .clock(ManualClock::new())
        .build()
        .unwrap();
    let calls = Calls::default();
    let (addr, c) = serve_limited(&limits, login_app(&calls)).await;
    for _ in 0..4 {
        let got = login(&c, addr, "203.0.113.1", "wrong").await;
        assert_eq!(got.status, StatusCode::UNAUTHORIZED);
    }
    assert_eq!(calls.get(), 4);
    assert_eq!(limits.shadow_rejections("login"), Some(3));
}

/// Outcome charging says nothing about concurrency, and needs a built-in policy that does not
/// queue: a typed error at build time.
#[test]
fn outcome_charging_where_it_cannot_apply_is_a_build_error() {
    let pool = Policy::concurrency(ConcurrencyOptions::new(4))
        .unwrap()
        .charge_when(failed);
    let queued = fixed(3, 60).queue(None).charge_when(failed);
    for policy in [pool, queued] {
        let err = RateLimiting::builder()
            .policy("p", policy)
            .build()
            .unwrap_err();
        assert!(
            matches!(&err, BuildError::Charging { policy, .. } if policy == "p"),
            "{err}"
        );
    }
}
