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

#[test]
fn probing_for_a_refiller_never_takes_its_lock() {
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
