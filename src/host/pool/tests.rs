//! The pool's files: status and the refiller's lock.

use super::*;

#[test]
fn status_is_written_only_into_a_recorded_pool() {
    let data = std::env::temp_dir().join(format!("sbx-pool-status-{:x}", rand::random::<u64>()));
    let pool = Pool::at(&data, "p");
    let s = Status { filling: 1, failed: 1, last_error: Some("x".into()) };
    // After `pool rm`: nothing recorded, so a late refiller writes nothing.
    pool.set_status(&s);
    assert!(!pool.dir.exists());
    assert!(pool
        .create(&PoolSpec {
            size: 1,
            max_idle_secs: None,
            request: CreateRequest::default(),
            engine: None,
            context: None
        })
        .unwrap());
    pool.set_status(&s);
    assert_eq!(pool.status().last_error.as_deref(), Some("x"));
    pool.forget();
    pool.set_status(&s);
    assert!(!pool.dir.exists());
    let _ = std::fs::remove_dir_all(&data);
}

/// Run in a process of its own: another test's `fork` copies this one's
/// lock fd into its child until that child's `exec` (close-on-exec), and
/// the lock, held by that copy meanwhile, made `try_lock` fail here at
/// times under load (a lock held for a moment by a probe would too, so a
/// retry cannot tell them apart).
#[test]
fn probing_for_a_refiller_never_takes_its_lock() {
    const ALONE: &str = "SBX_TEST_POOL_LOCK_ALONE";
    if std::env::var_os(ALONE).is_none() {
        let name = "host::pool::tests::probing_for_a_refiller_never_takes_its_lock";
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", name, "--test-threads=1", "--nocapture"])
            .env(ALONE, "1")
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && said.contains("1 passed"), "{said}");
        return;
    }
    let data = std::env::temp_dir().join(format!("sbx-pool-lock-{}-{}", std::process::id(), rand::random::<u64>()));
    let pool = Pool::at(&data, "p");
    std::fs::create_dir_all(&pool.dir).unwrap();
    drop(pool.try_lock().unwrap().unwrap());
    // `pool ls`, gc and every claim probe; a refiller starting meanwhile must still get the lock.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (p, s) = (pool.clone(), stop.clone());
    let prober = std::thread::spawn(move || {
        while !s.load(std::sync::atomic::Ordering::Relaxed) {
            std::hint::black_box(p.filling());
        }
    });
    let lost = (0..20_000).filter(|_| pool.try_lock().unwrap().is_none()).count();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    prober.join().unwrap();
    let held = pool.try_lock().unwrap().unwrap();
    assert!(pool.filling() && pool.try_lock().unwrap().is_none());
    drop(held);
    assert!(!pool.filling());
    let _ = std::fs::remove_dir_all(&data);
    assert_eq!(lost, 0, "a refiller lost its lock to a probe {lost} times");
}
