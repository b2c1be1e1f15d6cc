//! The ready signal of a listening process (`--ready-file PATH` on `stampede-agent --listen`,
//! `stampede serve` and `stampede run --listen`): once its port is bound, one line of JSON,
//! `{"listen":"127.0.0.1:PORT","pid":N}`, so a script or test learns the port (given as `:0`) and that
//! it may connect, without parsing the human "listening on" line.
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
#[error("cannot write the ready file {path}: {source}")]
pub struct ReadyError {
    pub path: PathBuf,
    pub source: std::io::Error,
}

/// The ready file's one line.
pub fn line(listen: SocketAddr, pid: u32) -> String {
    // A socket address never holds a quote or a backslash: nothing to escape.
    format!("{{\"listen\":\"{listen}\",\"pid\":{pid}}}\n")
}

/// Writes the ready file atomically (a temporary file beside it, renamed over it), so a reader
/// never sees it half written. A path that is already something else (a FIFO a script waits on, a
/// symlink, a terminal) is written through instead, never replaced: the line is one short write.
pub fn write(path: &Path, listen: SocketAddr) -> Result<(), ReadyError> {
    let fail = |source| ReadyError {
        path: path.to_path_buf(),
        source,
    };
    let pid = std::process::id();
    let through = std::fs::symlink_metadata(path).is_ok_and(|m| !m.file_type().is_file());
    if through {
        return std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(path)
            .and_then(|mut f| f.write_all(line(listen, pid).as_bytes()))
            .map_err(fail);
    }
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".{pid}.tmp"));
    let tmp = path.with_file_name(name);
    let written = std::fs::File::create(&tmp)
        .and_then(|mut f| f.write_all(line(listen, pid).as_bytes()))
        .and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(fail(e));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ready_file_is_one_json_line_in_place_of_an_old_one() {
        let dir = std::env::temp_dir().join(format!("stampede-ready-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ready.json");
        std::fs::write(&path, "stale").unwrap();
        write(&path, "127.0.0.1:7700".parse().unwrap()).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["listen"], "127.0.0.1:7700");
        assert_eq!(v["pid"], std::process::id());
        assert!(
            text.ends_with("}\n") && text.lines().count() == 1,
            "{text:?}"
        );
        let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        assert_eq!(left.len(), 1, "no temporary file left: {left:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_unwritable_ready_file_names_its_path() {
        let e = write(
            Path::new("/nonexistent/dir/ready.json"),
            "[::1]:1".parse().unwrap(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("/nonexistent/dir/ready.json"), "{e}");
    }

    #[test]
    fn a_symlink_or_a_fifo_is_written_through_not_replaced() {
        let dir =
            std::env::temp_dir().join(format!("stampede-ready-through-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let target = dir.join("ready.json");
        let link = dir.join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        std::fs::write(&target, "").unwrap();
        let addr: SocketAddr = "127.0.0.1:9".parse().unwrap();
        write(&link, addr).unwrap();
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert!(
            std::fs::read_to_string(&target)
                .unwrap()
                .contains("127.0.0.1:9")
        );
        let fifo = dir.join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
        };
        write(&fifo, addr).unwrap();
        assert!(
            reader
                .join()
                .unwrap()
                .contains("\"listen\":\"127.0.0.1:9\"")
        );
    }
}
