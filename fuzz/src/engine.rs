//! The run loop: inputs made from the corpus and a seed, each run under a silenced panic hook,
//! timed, and watched by a thread that ends the process if one never returns.

use std::cell::{Cell, RefCell};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Once};
use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::mutate;
use crate::targets::Target;

/// How much to run.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    /// Generated inputs (after the corpus, which always runs whole).
    pub inputs: u64,
    /// Stop generating after this long.
    pub time: Duration,
    pub seed: u64,
    /// Index of the first generated input (a run can be split into chunks).
    pub first: u64,
    /// Run the corpus files as they are first (once per run, not per chunk).
    pub with_corpus: bool,
}

/// One input that failed: it panicked or ran past the target's limit.
#[derive(Debug, Clone)]
pub struct Finding {
    /// Index of the generated input, or `None` for a corpus file.
    pub index: Option<u64>,
    pub input: Vec<u8>,
    pub what: String,
}

/// What a run of one target did.
#[derive(Debug, Clone)]
pub struct Report {
    pub target: &'static str,
    pub corpus: usize,
    /// Generated inputs run.
    pub inputs: u64,
    pub findings: Vec<Finding>,
    /// The longest any input took, and which.
    pub slowest: Duration,
    pub slowest_index: Option<u64>,
    pub elapsed: Duration,
}

impl Report {
    pub fn panics(&self) -> usize {
        self.findings
            .iter()
            .filter(|f| f.what.starts_with("panic"))
            .count()
    }

    pub fn hangs(&self) -> usize {
        self.findings.len() - self.panics()
    }
}

/// The corpus directory of a target: seeds and every input that once failed.
pub fn corpus_dir(target: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target)
}

/// The corpus of a target, in file-name order.
pub fn load_corpus(target: &str) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(corpus_dir(target))
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| p.is_file())
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
        .into_iter()
        .filter_map(|p| {
            let name = p.file_name()?.to_string_lossy().into_owned();
            Some((name, std::fs::read(&p).ok()?))
        })
        .collect()
}

/// Generated input `index` of a run with `seed`: the same pair always gives the same bytes.
pub fn input(target: &dyn Target, corpus: &[Vec<u8>], seed: u64, index: u64) -> Vec<u8> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(index);
    mutate::generate(&mut rng, corpus, target.dictionary())
}

thread_local! {
    /// Set while this thread runs fuzz inputs: its panics are recorded, not printed.
    static SILENT: Cell<bool> = const { Cell::new(false) };
    static LAST_PANIC: RefCell<String> = const { RefCell::new(String::new()) };
}

/// One process-wide hook that keeps fuzzing threads' panics off stderr (a million expected
/// lines would bury the report) and leaves every other thread's as they were.
fn install_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if SILENT.with(Cell::get) {
                let at = info
                    .location()
                    .map(|l| format!(" at {}:{}", l.file(), l.line()))
                    .unwrap_or_default();
                let msg = info
                    .payload()
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| info.payload().downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                LAST_PANIC.with(|p| *p.borrow_mut() = format!("{msg}{at}"));
            } else {
                default(info);
            }
        }));
    });
}

/// Watches the input being run; one that runs `limit` past its start never returns in time,
/// so the process is ended with the seed and index that replay it.
struct Watchdog {
    started_ms: Arc<AtomicU64>,
    index: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    base: Instant,
}

const IDLE: u64 = u64::MAX;
const CORPUS: u64 = u64::MAX - 1;

impl Watchdog {
    fn start(target: &'static str, seed: u64, limit: Duration) -> Self {
        let started_ms = Arc::new(AtomicU64::new(IDLE));
        let index = Arc::new(AtomicU64::new(CORPUS));
        let stop = Arc::new(AtomicBool::new(false));
        let base = Instant::now();
        let (s, i, st) = (started_ms.clone(), index.clone(), stop.clone());
        std::thread::spawn(move || {
            while !st.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(100));
                let started = s.load(Ordering::Relaxed);
                let now = base.elapsed().as_millis() as u64;
                if started != IDLE && now.saturating_sub(started) > limit.as_millis() as u64 {
                    let which = match i.load(Ordering::Relaxed) {
                        CORPUS => "a corpus file".to_string(),
                        n => format!(
                            "input {n} (replay: cargo run -p fuzz -- replay {target} --seed {seed} --index {n})"
                        ),
                    };
                    // Straight to the file descriptor: a test harness's capture dies with us.
                    let _ = writeln!(
                        std::io::stderr(),
                        "fuzz {target}: {which} has run for more than {limit:?}: a hang; ending the process"
                    );
                    std::process::abort();
                }
            }
        });
        Watchdog {
            started_ms,
            index,
            stop,
            base,
        }
    }

    fn begin(&self, index: u64) {
        self.index.store(index, Ordering::Relaxed);
        self.started_ms
            .store(self.base.elapsed().as_millis() as u64, Ordering::Relaxed);
    }

    fn end(&self) {
        self.started_ms.store(IDLE, Ordering::Relaxed);
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Runs one input; a panic or a run longer than the target's limit is the finding's text.
pub fn run_one(target: &dyn Target, input: &[u8]) -> (Duration, Option<String>) {
    install_hook();
    SILENT.with(|s| s.set(true));
    let t0 = Instant::now();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| target.run(input)));
    let took = t0.elapsed();
    SILENT.with(|s| s.set(false));
    let finding = match result {
        Err(_) => Some(format!(
            "panic: {}",
            LAST_PANIC.with(|p| std::mem::take(&mut *p.borrow_mut()))
        )),
        Ok(()) if took > target.slow_limit() => Some(format!(
            "slow: took {took:?}, more than the limit of {:?}",
            target.slow_limit()
        )),
        Ok(()) => None,
    };
    (took, finding)
}

/// Stack of the thread inputs run on: a server's query threads get one sized for the deepest
/// query they admit; a test thread's default (2 MiB) is smaller.
const STACK: usize = 256 << 20;

/// Runs the corpus of `target`, then generated inputs within `budget`, on a thread with a
/// server-sized stack.
pub fn run_target(target: &dyn Target, budget: Budget) -> Report {
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name(format!("fuzz-{}", target.name()))
            .stack_size(STACK)
            .spawn_scoped(scope, || run_target_here(target, budget))
            .expect("a fuzzing thread")
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
    })
}

fn run_target_here(target: &dyn Target, budget: Budget) -> Report {
    let t0 = Instant::now();
    let corpus = load_corpus(target.name());
    let seeds: Vec<Vec<u8>> = corpus.iter().map(|(_, b)| b.clone()).collect();
    // A hang is a run far past the target's own limit: what the limits failed to stop.
    let watchdog = Watchdog::start(target.name(), budget.seed, target.slow_limit() * 10);
    let mut report = Report {
        target: target.name(),
        corpus: corpus.len(),
        inputs: 0,
        findings: Vec::new(),
        slowest: Duration::ZERO,
        slowest_index: None,
        elapsed: Duration::ZERO,
    };
    let record = |report: &mut Report, index: Option<u64>, input: &[u8], took, finding| {
        if took > report.slowest {
            report.slowest = took;
            report.slowest_index = index;
        }
        if let Some(what) = finding {
            report.findings.push(Finding {
                index,
                input: input.to_vec(),
                what,
            });
        }
    };
    for (_, bytes) in corpus.iter().filter(|_| budget.with_corpus) {
        watchdog.begin(CORPUS);
        let (took, finding) = run_one(target, bytes);
        watchdog.end();
        record(&mut report, None, bytes, took, finding);
    }
    let mut i = budget.first;
    while i < budget.first + budget.inputs && t0.elapsed() < budget.time {
        let bytes = input(target, &seeds, budget.seed, i);
        watchdog.begin(i);
        let (took, finding) = run_one(target, &bytes);
        watchdog.end();
        record(&mut report, Some(i), &bytes, took, finding);
        report.inputs += 1;
        i += 1;
    }
    report.elapsed = t0.elapsed();
    report
}
