//! Tiered rules (article 002): a client's tier and the class of its request pick a rule, and each
//! rule is a partitioned limiter with a limiter per client.
//!
//! ```text
//! cargo run --example tiered
//! ```
//!
//! | tier \ class | api                                   | web                        |
//! |--------------|---------------------------------------|----------------------------|
//! | free         | fixed window, 3 a minute              | token bucket 5, 1 a second |
//! | pro          | token bucket 10, 5 a second           | token bucket 20, 10 a second |
//! | enterprise   | 4 concurrent requests (no rate limit) | no limit                   |
//!
//! Anonymous traffic (by IP address, article 002's `ClientType.IP`) has its own rule: a fixed
//! window of 2 a second per address in each class. A tier with no rule for a class (here
//! none, but try removing one) is a typed error, [`TierError::NoRule`], not a silent decision.
//!
//! Time moves only when the example advances its [`ManualClock`], so the output is the same on
//! every run; every printed decision is also asserted.

use std::error::Error;
use std::time::Duration;

use tollgate::{
    Clock, ConcurrencyOptions, FixedWindowOptions, ManualClock, PartitionConfig, PartitionKind,
    Reason, TierError, TierLease, TierRules, TokenBucketOptions,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tier {
    Free,
    Pro,
    Enterprise,
    /// Not signed in: keyed by IP address.
    Anonymous,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    Api,
    Web,
}

/// Article 002's `ClientIdentity`: who is asking.
struct Client {
    id: &'static str,
    tier: Tier,
}

type Rules<'c> = TierRules<Tier, Class, &'static str, &'c ManualClock>;

/// Article 002's `RuleStore` and `RateLimitFactory` in one table.
fn rules(clock: &ManualClock) -> Result<Rules<'_>, Box<dyn Error>> {
    let sec = Duration::from_secs(1);
    let mut r = TierRules::with_clock(clock);
    let free_api =
        PartitionKind::fixed_window(FixedWindowOptions::new(3, Duration::from_secs(60)))?;
    let free_web = PartitionKind::token_bucket(TokenBucketOptions::new(5, 1, sec))?;
    let pro_api = PartitionKind::token_bucket(TokenBucketOptions::new(10, 5, sec))?;
    let pro_web = PartitionKind::token_bucket(TokenBucketOptions::new(20, 10, sec))?;
    let ent_api = PartitionKind::concurrency(ConcurrencyOptions::new(4))?;
    let by_ip = PartitionKind::fixed_window(FixedWindowOptions::new(2, sec))?;
    // Free clients are many: a big table, evicting idle ones when full. Paying clients have
    // their own tables, which a flood of free or anonymous keys cannot touch.
    r.add(
        Tier::Free,
        Class::Api,
        free_api,
        PartitionConfig::new(100_000),
    )?;
    r.add(
        Tier::Free,
        Class::Web,
        free_web,
        PartitionConfig::new(100_000),
    )?;
    r.add(Tier::Pro, Class::Api, pro_api, PartitionConfig::new(10_000))?;
    r.add(Tier::Pro, Class::Web, pro_web, PartitionConfig::new(10_000))?;
    r.add(
        Tier::Enterprise,
        Class::Api,
        ent_api,
        PartitionConfig::new(1_000),
    )?;
    r.add(
        Tier::Enterprise,
        Class::Web,
        PartitionKind::NO_LIMIT,
        PartitionConfig::new(1_000),
    )?;
    for class in [Class::Api, Class::Web] {
        r.add(Tier::Anonymous, class, by_ip, PartitionConfig::new(100_000))?;
    }
    Ok(r)
}

/// One request: prints and returns the decision (the lease is returned so the caller decides
/// how long the request holds it).
fn request<'c>(
    rules: &Rules<'c>,
    clock: &ManualClock,
    client: &Client,
    class: Class,
) -> Result<TierLease<&'static str, &'c ManualClock>, TierError<Tier, Class>> {
    let decision = rules.try_acquire(&client.tier, &class, &client.id, 1);
    let t = clock.now().as_nanos() as f64 / 1e9;
    let shown = match &decision {
        Ok(_) => "admitted".to_string(),
        Err(TierError::Rejected(r)) => match r.retry_after() {
            Some(d) => format!("{:?}, retry after {d:?}", r.reason()),
            None => format!("{:?}", r.reason()),
        },
        Err(e) => e.to_string(),
    };
    let (tier, class) = (format!("{:?}", client.tier), format!("{class:?}"));
    println!(
        "t={t:>5.1}s  {tier:<10} {:<11} {class:<3}  {shown}",
        client.id
    );
    decision
}

fn reason<T>(r: &Result<T, TierError<Tier, Class>>) -> Option<Reason> {
    r.as_ref()
        .err()
        .and_then(|e| e.rejection())
        .map(|r| r.reason())
}

fn main() -> Result<(), Box<dyn Error>> {
    let clock = ManualClock::new();
    let rules = rules(&clock)?;
    let ann = Client {
        id: "ann",
        tier: Tier::Free,
    };
    let bob = Client {
        id: "bob",
        tier: Tier::Free,
    };
    let pat = Client {
        id: "pat",
        tier: Tier::Pro,
    };
    let eve = Client {
        id: "eve",
        tier: Tier::Enterprise,
    };
    let ip = Client {
        id: "203.0.113.9",
        tier: Tier::Anonymous,
    };

    println!("-- free api: 3 a minute per client, each client its own window");
    for _ in 0..3 {
        assert!(request(&rules, &clock, &ann, Class::Api).is_ok());
    }
    let r = request(&rules, &clock, &ann, Class::Api);
    assert_eq!(reason(&r), Some(Reason::Exhausted));
    assert_eq!(
        r.as_ref().unwrap_err().rejection().unwrap().retry_after(),
        Some(Duration::from_secs(60))
    );
    assert!(request(&rules, &clock, &bob, Class::Api).is_ok());
    // The same client on the web class: another rule, another limiter.
    assert!(request(&rules, &clock, &ann, Class::Web).is_ok());

    println!("-- pro api: a burst of 10, then 5 a second");
    let mut admitted = 0;
    for _ in 0..12 {
        admitted += usize::from(request(&rules, &clock, &pat, Class::Api).is_ok());
    }
    assert_eq!(admitted, 10);
    clock.advance(Duration::from_secs(1));
    admitted = 0;
    for _ in 0..6 {
        admitted += usize::from(request(&rules, &clock, &pat, Class::Api).is_ok());
    }
    assert_eq!(admitted, 5);

    println!("-- enterprise api: 4 at a time, however fast; web unlimited");
    let held: Vec<_> = (0..4)
        .map(|_| request(&rules, &clock, &eve, Class::Api))
        .collect::<Result<_, _>>()?;
    let r = request(&rules, &clock, &eve, Class::Api);
    assert_eq!(reason(&r), Some(Reason::Exhausted));
    drop(held); // the requests finish: their permits come back
    assert!(request(&rules, &clock, &eve, Class::Api).is_ok());
    for _ in 0..3 {
        assert!(request(&rules, &clock, &eve, Class::Web).is_ok());
    }

    println!("-- anonymous: 2 a second per IP address and class");
    for expect in [true, true, false] {
        assert_eq!(request(&rules, &clock, &ip, Class::Web).is_ok(), expect);
    }
    clock.advance(Duration::from_secs(1));
    assert!(request(&rules, &clock, &ip, Class::Api).is_ok());

    println!("-- a minute later, ann's window has reset");
    clock.advance(Duration::from_secs(60));
    assert!(request(&rules, &clock, &ann, Class::Api).is_ok());

    println!("-- a rule the table does not have: a typed error");
    let mut partial: TierRules<Tier, Class, &'static str, &ManualClock> =
        TierRules::with_clock(&clock);
    partial.add(
        Tier::Free,
        Class::Api,
        PartitionKind::NO_LIMIT,
        PartitionConfig::new(10),
    )?;
    let r = request(&partial, &clock, &pat, Class::Api);
    assert_eq!(
        r.unwrap_err(),
        TierError::NoRule {
            tier: Tier::Pro,
            class: Class::Api
        }
    );

    println!("\nper rule, clients held: {:?}", rules);
    Ok(())
}
