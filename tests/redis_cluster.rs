//! The Redis limiter on a real three-node Redis Cluster (feature `redis-cluster`), started by this
//! test (`TOLLGATE_REDIS_SERVER`, else `redis-server` on the PATH; `redis-cli` to create the
//! cluster). Run with `bash .ci/redis.sh cargo test --features redis-cluster --test redis_cluster`.

use core::time::Duration;
use std::process::{Child, Command, Stdio};

use ::redis::cluster::ClusterClient;
use tollgate::redis::{Algorithm, DecidedBy, FailurePolicy, RedisLimiter};
use tollgate::FixedWindowOptions;

struct Node(Child, std::path::PathBuf);

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        let _ = std::fs::remove_dir_all(&self.1);
    }
}

fn free_port() -> u16 {
    // Cluster nodes also listen on port + 10000: keep that below 65536.
    loop {
        let p = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        if p < 55_000 && std::net::TcpListener::bind(("127.0.0.1", p + 10_000)).is_ok() {
            return p;
        }
    }
}

fn start_cluster() -> (Vec<Node>, Vec<String>) {
    let bin = std::env::var("TOLLGATE_REDIS_SERVER").unwrap_or_else(|_| "redis-server".into());
    let mut nodes = Vec::new();
    let mut addrs = Vec::new();
    for i in 0..3 {
        let port = free_port();
        let dir = std::env::temp_dir().join(format!("tollgate-cluster-{}-{i}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let child = Command::new(&bin)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args([
                "--cluster-enabled",
                "yes",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .arg("--dir")
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server");
        nodes.push(Node(child, dir));
        addrs.push(format!("127.0.0.1:{port}"));
    }
    for a in &addrs {
        let port = a.rsplit(':').next().unwrap();
        let mut up = false;
        for _ in 0..200 {
            let ok = Command::new("redis-cli")
                .args(["-p", port, "ping"])
                .output()
                .is_ok_and(|o| o.stdout.starts_with(b"PONG"));
            if ok {
                up = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        assert!(up, "node {a} did not start");
    }
    let out = Command::new("redis-cli")
        .arg("--cluster")
        .arg("create")
        .args(&addrs)
        .args(["--cluster-replicas", "0", "--cluster-yes"])
        .output()
        .expect("redis-cli");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // Wait until every node sees the cluster as ok.
    for a in &addrs {
        let port = a.rsplit(':').next().unwrap();
        let mut ok = false;
        for _ in 0..400 {
            let o = Command::new("redis-cli")
                .args(["-p", port, "cluster", "info"])
                .output()
                .unwrap();
            if String::from_utf8_lossy(&o.stdout).contains("cluster_state:ok") {
                ok = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(ok, "cluster not ok on {a}");
    }
    let urls = addrs.iter().map(|a| format!("redis://{a}/")).collect();
    (nodes, urls)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_hold_on_every_slot_of_a_cluster() {
    let (_nodes, urls) = start_cluster();
    // Per call, then batched: a run takes only the queued decisions of one hash slot, so
    // concurrent decisions of partitions on different slots (and nodes) never meet CROSSSLOT.
    for batch in [1, tollgate::redis::BATCH_SIZE] {
        let mut machines = Vec::new();
        for _ in 0..2 {
            let conn = ClusterClient::new(urls.clone())
                .unwrap()
                .get_async_connection()
                .await
                .unwrap();
            machines.push(
                RedisLimiter::builder(
                    conn,
                    format!("cl{batch}"),
                    Algorithm::FixedWindow(FixedWindowOptions::new(7, Duration::from_secs(60))),
                    FailurePolicy::FailClosed,
                )
                .timeout(Duration::from_secs(2))
                .batch_size(batch)
                .build()
                .unwrap(),
            );
        }
        // 30 partitions spread over the slots of all three nodes; each admits exactly 7 of 20,
        // from two clients, with the script loaded on whichever node holds the key.
        let mut tasks = Vec::new();
        for p in 0..30 {
            for m in &machines {
                let m = m.clone();
                tasks.push(tokio::spawn(async move {
                    let mut granted = 0;
                    for _ in 0..10 {
                        let d = m.decide(&format!("user-{p}"), 1).await;
                        assert_eq!(d.decided_by, DecidedBy::Redis, "batch {batch}: {d:?}");
                        granted += u32::from(d.allowed());
                    }
                    (p, granted)
                }));
            }
        }
        let mut per = [0u32; 30];
        for t in tasks {
            let (p, g) = t.await.unwrap();
            per[p] += g;
        }
        assert_eq!(per, [7; 30], "batch {batch}");
    }
}
