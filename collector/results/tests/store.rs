//! The publishing protocol over both kinds of store: an object store on the local file system
//! (`file://`, the same code as S3's but for the client) and a directory. The S3 API itself is
//! met in the e2e tests (tests/e2e/results_store.rs, against moto_server).

use std::path::Path;

use results::{Plan, Published, Store};

const DONE: &str = "run.json";

/// A finished run in a fresh directory: its done file and a nested file, each naming `tag`.
fn run_dir(parent: &Path, tag: &str) -> std::path::PathBuf {
    let dir = parent.join(format!("made-{tag}"));
    std::fs::create_dir_all(dir.join("logs")).unwrap();
    std::fs::write(dir.join(DONE), format!("{{\"by\": \"{tag}\"}}")).unwrap();
    std::fs::write(dir.join("logs/agent.stdout"), format!("output of {tag}\n")).unwrap();
    dir
}

fn stores(tmp: &Path) -> Vec<Store> {
    vec![
        Store::open(&format!("file://{}", tmp.join("objects").display()), DONE).unwrap(),
        Store::open(tmp.join("dir").to_str().unwrap(), DONE).unwrap(),
    ]
}

#[tokio::test]
async fn a_published_run_is_complete_and_comes_back_whole() {
    let tmp = tempfile::tempdir().unwrap();
    for store in stores(tmp.path()) {
        let keys = vec!["a/p/noise-1".to_string(), "a/p/noise-2".to_string()];
        assert!(store.completed(&keys).await.unwrap().is_empty());
        let made = run_dir(tmp.path(), "one");
        assert_eq!(
            store.publish(&keys[0], &made).await.unwrap(),
            Published::Mine
        );
        assert!(
            !made.exists(),
            "{}: the made run is gone once published",
            store.describe()
        );
        let done = store.completed(&keys).await.unwrap();
        assert_eq!(done.into_iter().collect::<Vec<_>>(), vec![keys[0].clone()]);
        assert_eq!(store.summary(&keys[0]).await.unwrap()["by"], "one");
        let local = store
            .local_copy(&keys[0], &tmp.path().join("cache"))
            .await
            .unwrap();
        assert_eq!(
            std::fs::read_to_string(local.join("logs/agent.stdout")).unwrap(),
            "output of one\n"
        );
        std::fs::remove_dir_all(tmp.path().join("cache")).ok();
    }
}

#[tokio::test]
async fn of_two_writers_of_one_run_the_first_stands_and_the_second_leaves_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    for store in stores(tmp.path()) {
        let key = "a/p/quiet-1";
        let first = run_dir(tmp.path(), "first");
        let second = run_dir(tmp.path(), "second");
        let (a, b) = tokio::join!(store.publish(key, &first), store.publish(key, &second));
        let mut outcomes = [a.unwrap(), b.unwrap()];
        outcomes.sort_by_key(|p| *p == Published::AlreadyThere);
        assert_eq!(outcomes, [Published::Mine, Published::AlreadyThere]);
        let winner = store.summary(key).await.unwrap()["by"]
            .as_str()
            .unwrap()
            .to_string();
        let local = store
            .local_copy(key, &tmp.path().join("cache"))
            .await
            .unwrap();
        assert_eq!(
            std::fs::read_to_string(local.join("logs/agent.stdout")).unwrap(),
            format!("output of {winner}\n"),
            "the run's files are the marker's writer's"
        );
        std::fs::remove_dir_all(tmp.path().join("cache")).ok();
    }
    // The loser's uploaded files were deleted: one attempt of the run holds files.
    let attempts = std::fs::read_dir(tmp.path().join("objects/runs/a/p/quiet-1"))
        .unwrap()
        .filter(|e| has_files(&e.as_ref().unwrap().path()))
        .count();
    assert_eq!(attempts, 1);
}

/// Whether any regular file is below `dir` (a local object store leaves empty directories).
fn has_files(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries.flatten().any(|e| {
            let p = e.path();
            p.is_file() || (p.is_dir() && has_files(&p))
        })
    })
}

#[tokio::test]
async fn a_writer_killed_before_its_marker_leaves_no_complete_run() {
    let tmp = tempfile::tempdir().unwrap();
    let store = &stores(tmp.path())[0];
    // What a killed writer leaves: an attempt's files, no marker.
    let orphan = tmp.path().join("objects/runs/a/p/noise-1/0123abcd");
    std::fs::create_dir_all(&orphan).unwrap();
    std::fs::write(orphan.join(DONE), "{\"by\": \"killed\"}").unwrap();
    let key = "a/p/noise-1".to_string();
    assert!(
        store
            .completed(std::slice::from_ref(&key))
            .await
            .unwrap()
            .is_empty()
    );
    assert!(store.summary(&key).await.is_err());
    // The retry publishes; the orphan is ignored.
    let made = run_dir(tmp.path(), "retry");
    assert_eq!(store.publish(&key, &made).await.unwrap(), Published::Mine);
    assert_eq!(store.summary(&key).await.unwrap()["by"], "retry");
}

#[tokio::test]
async fn a_file_changed_in_the_store_is_refused_on_download() {
    let tmp = tempfile::tempdir().unwrap();
    let store = &stores(tmp.path())[0];
    let made = run_dir(tmp.path(), "one");
    store.publish("k/1", &made).await.unwrap();
    let attempt = std::fs::read_dir(tmp.path().join("objects/runs/k/1"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    std::fs::write(attempt.join("logs/agent.stdout"), "tampered\n").unwrap();
    let err = store
        .local_copy("k/1", &tmp.path().join("cache"))
        .await
        .unwrap_err();
    assert!(format!("{err:#}").contains("SHA-256"), "{err:#}");
    assert!(!tmp.path().join("cache/k/1").exists());
}

#[tokio::test]
async fn shards_of_other_work_are_refused_by_the_plan() {
    let tmp = tempfile::tempdir().unwrap();
    for store in stores(tmp.path()) {
        let plan = Plan {
            kind: "eval".into(),
            settings: serde_json::json!({"runs": 1}),
            work: vec!["a/1".into(), "a/2".into()],
        };
        store.put_plan(&plan).await.unwrap();
        store.put_plan(&plan).await.unwrap();
        assert_eq!(store.plan().await.unwrap(), Some(plan.clone()));
        let mut other = plan.clone();
        other.work.push("a/3".into());
        let err = store.put_plan(&other).await.unwrap_err();
        assert!(format!("{err:#}").contains("`a/3`"), "{err:#}");
    }
}

#[test]
fn a_bad_location_says_what_is_expected() {
    let err = Store::open("ftp://host/x", DONE)
        .err()
        .expect("ftp is no store");
    assert!(
        format!("{err:#}").contains("expected s3://bucket/prefix"),
        "{err:#}"
    );
    let err = Store::open("not a url://x", DONE).err().expect("not a URL");
    assert!(format!("{err:#}").contains("not a URL"), "{err:#}");
    // Without a scheme it is a directory.
    assert!(
        Store::open("runs/board", DONE)
            .unwrap()
            .local_root()
            .is_some()
    );
}
