//! Cgroup v2 directories: finding the hierarchy, opening a directory a fault is scoped to, creating
//! one for a command faultline starts and removing it again. A cgroup's id, as BPF programs see it,
//! is its directory's inode number.

use std::fs::{self, File};
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// `statfs` magic of a cgroup v2 filesystem.
const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;

#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    #[error(
        "no cgroup v2 hierarchy is mounted (looked in /proc/self/mountinfo for a cgroup2 mount); mount one with `mount -t cgroup2 none /sys/fs/cgroup/unified`"
    )]
    NoHierarchy,
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{path} is not a cgroup v2 directory (cgroup v2 is mounted at {root})")]
    NotCgroup2 { path: PathBuf, root: PathBuf },
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> CgroupError + '_ {
    move |source| CgroupError::Io {
        path: path.to_owned(),
        source,
    }
}

/// Where the cgroup v2 hierarchy is mounted (`/sys/fs/cgroup`, or `/sys/fs/cgroup/unified` on a
/// hybrid host).
pub fn hierarchy_root() -> Result<PathBuf, CgroupError> {
    let path = Path::new("/proc/self/mountinfo");
    let text = fs::read_to_string(path).map_err(io_err(path))?;
    mount_point_of(&text, "cgroup2").ok_or(CgroupError::NoHierarchy)
}

/// The mount point of the first mount of `fstype` in a mountinfo text (octal escapes decoded).
fn mount_point_of(mountinfo: &str, fstype: &str) -> Option<PathBuf> {
    mountinfo.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        (right.split(' ').next()? == fstype).then(|| unescape(left.split(' ').nth(4)?))?
    })
}

fn unescape(field: &str) -> Option<PathBuf> {
    let mut out = Vec::with_capacity(field.len());
    let bytes = field.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 3 < bytes.len() {
            let code = u8::from_str_radix(&field[i + 1..i + 4], 8).ok()?;
            out.push(code);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Some(PathBuf::from(String::from_utf8(out).ok()?))
}

/// The cgroup v2 directory this process is in.
pub fn own_cgroup() -> Result<PathBuf, CgroupError> {
    let root = hierarchy_root()?;
    let path = Path::new("/proc/self/cgroup");
    let text = fs::read_to_string(path).map_err(io_err(path))?;
    let relative = text
        .lines()
        .find_map(|line| line.strip_prefix("0::"))
        .ok_or(CgroupError::NoHierarchy)?;
    Ok(root.join(relative.trim_start_matches('/')))
}

/// An open cgroup v2 directory.
#[derive(Debug)]
pub struct Cgroup {
    path: PathBuf,
    id: u64,
    dir: File,
}

impl Cgroup {
    /// Opens a cgroup v2 directory, refusing anything else (a cgroup v1 directory, a plain one).
    pub fn open(path: &Path) -> Result<Cgroup, CgroupError> {
        let path = fs::canonicalize(path).map_err(io_err(path))?;
        let dir = File::open(&path).map_err(io_err(&path))?;
        let stat = rustix::fs::fstatfs(&dir).map_err(|e| CgroupError::Io {
            path: path.clone(),
            source: e.into(),
        })?;
        if stat.f_type as i64 != CGROUP2_SUPER_MAGIC {
            let root = hierarchy_root()?;
            return Err(CgroupError::NotCgroup2 { path, root });
        }
        let id = dir.metadata().map_err(io_err(&path))?.ino();
        Ok(Cgroup { path, id, dir })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The id BPF programs see (`bpf_get_current_cgroup_id`).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The processes directly in the directory.
    pub fn pids(&self) -> Result<Vec<u32>, CgroupError> {
        read_pids(&self.path)
    }
}

impl AsFd for Cgroup {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.dir.as_fd()
    }
}

fn read_pids(dir: &Path) -> Result<Vec<u32>, CgroupError> {
    let path = dir.join("cgroup.procs");
    let text = fs::read_to_string(&path).map_err(io_err(&path))?;
    Ok(text.lines().filter_map(|l| l.trim().parse().ok()).collect())
}

/// Moves a process into a cgroup v2 directory.
pub fn move_process(dir: &Path, pid: u32) -> Result<(), CgroupError> {
    let path = dir.join("cgroup.procs");
    fs::write(&path, pid.to_string()).map_err(io_err(&path))
}

/// Creates `dir` (its parents too) as a cgroup; an existing directory is an error, so that two
/// injections never share one faultline made.
pub fn create(dir: &Path) -> Result<Cgroup, CgroupError> {
    if let Some(parent) = dir.parent() {
        fs::create_dir_all(parent).map_err(io_err(parent))?;
    }
    fs::create_dir(dir).map_err(io_err(dir))?;
    Cgroup::open(dir)
}

/// Removes a cgroup faultline created, moving any process still in it to `return_to` first.
/// Idempotent: a directory that is already gone is fine.
pub fn remove(dir: &Path, return_to: &Path) -> Result<(), CgroupError> {
    // A process forking while we move its siblings can land after the listing: try a few rounds.
    for _ in 0..20 {
        if !dir.exists() {
            return Ok(());
        }
        for pid in read_pids(dir)? {
            // A process that exited between the listing and the move is not an error.
            match move_process(return_to, pid) {
                Ok(()) => {}
                Err(CgroupError::Io { source, .. })
                    if source.raw_os_error() == Some(rustix::io::Errno::SRCH.raw_os_error()) => {}
                Err(err) => return Err(err),
            }
        }
        match fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::BUSY.raw_os_error()) => continue,
            Err(e) => return Err(io_err(dir)(e)),
        }
    }
    Err(CgroupError::Io {
        path: dir.to_owned(),
        source: io::Error::other("processes kept appearing in it"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_cgroup2_mount_point() {
        let text = "29 1 0:26 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755\n\
                    35 29 0:30 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw\n\
                    36 29 0:31 / /mnt/with\\040space rw - cgroup2 none rw\n";
        assert_eq!(
            mount_point_of(text, "cgroup2"),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        assert_eq!(
            mount_point_of(&text[text.find("36").unwrap()..], "cgroup2"),
            Some(PathBuf::from("/mnt/with space"))
        );
        assert_eq!(mount_point_of(text, "bpf"), None);
    }
}
