"""The persistent cache of measured decisions: one human-readable JSON file,
$BWDCONV_CACHE_DIR/decisions-v1.json (default ~/.cache/bwdconv/).

- Writes are atomic (a temporary file in the same directory, then a rename)
  and merge: under an exclusive lock on decisions-v1.json.lock the file is
  read again and every entry on disk that this process does not have is kept,
  so processes tuning at once (DDP ranks) never lose each other's entries.
- A file that cannot be read (corrupt, truncated, another format version)
  gives one warning and is ignored; the next write sets it aside as
  decisions-v1.json.corrupt instead of overwriting it. A malformed entry is
  dropped alone, the others stay.
- A directory that cannot be written gives one warning; the decisions then
  live in memory only.
"""

import contextlib
import json
import os
import tempfile
import threading
import warnings

try:
    import fcntl
except ImportError:  # not POSIX: no lock, writes stay atomic
    fcntl = None

FORMAT = "bwdconv-decisions"
VERSION = 1
FILE_NAME = f"decisions-v{VERSION}.json"


# The environment variables that directory() reads (expanduser reads HOME).
LOCATION_VARIABLES = ("BWDCONV_CACHE_DIR", "HOME")


def directory():
    """$BWDCONV_CACHE_DIR, or ~/.cache/bwdconv."""
    return os.environ.get("BWDCONV_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "bwdconv")


def path():
    return os.path.join(directory(), FILE_NAME)


class UnreadableFile(Exception):
    """The cache file exists but is not a decisions file of this version."""


def _valid_entry(entry):
    return isinstance(entry, dict) and isinstance(entry.get("gradients"), dict) and all(
        isinstance(g, dict) and isinstance(g.get("choice"), str)
        for g in entry["gradients"].values())


def read_entries(file_path):
    """{key: entry} from the file ({} when it does not exist); raises
    UnreadableFile with the reason when it is corrupt or of another version.
    Malformed entries are left out."""
    try:
        with open(file_path, encoding="utf-8") as f:
            text = f.read()
    except (FileNotFoundError, NotADirectoryError):
        return {}
    except (OSError, UnicodeDecodeError) as error:
        raise UnreadableFile(str(error)) from error
    try:
        data = json.loads(text)
    except ValueError as error:
        raise UnreadableFile(f"not valid JSON ({error})") from error
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise UnreadableFile("not a bwdconv decisions file")
    if data.get("version") != VERSION:
        raise UnreadableFile(f"format version {data.get('version')!r}, this bwdconv reads {VERSION}")
    entries = data.get("entries")
    if not isinstance(entries, dict):
        raise UnreadableFile("no entries")
    return {k: e for k, e in entries.items() if _valid_entry(e)}


@contextlib.contextmanager
def _locked(dir_path):
    with open(os.path.join(dir_path, FILE_NAME + ".lock"), "a") as lock:
        if fcntl is not None:
            fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            if fcntl is not None:
                fcntl.flock(lock, fcntl.LOCK_UN)


def _write_atomically(file_path, entries):
    text = json.dumps({"format": FORMAT, "version": VERSION, "entries": entries},
                      indent=1, sort_keys=True)
    fd, tmp = tempfile.mkstemp(prefix=FILE_NAME + ".", suffix=".tmp",
                               dir=os.path.dirname(file_path))
    try:
        os.chmod(tmp, 0o644)  # readable like any other file, not mkstemp's 0600
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, file_path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


class DecisionCache:
    """The decisions of this process, backed by the file at path()."""

    def __init__(self):
        self._lock = threading.Lock()
        self._entries = None  # loaded on first use
        self._path = None
        self._writable = True

    def _warn(self, message):
        warnings.warn(f"bwdconv: {message}", RuntimeWarning, stacklevel=4)

    def _load(self):
        if self._entries is not None and self._path == path():
            return
        self._path, self._writable = path(), True
        try:
            self._entries = read_entries(self._path)
        except UnreadableFile as why:
            self._warn(f"ignoring the decisions cache {self._path}: {why}")
            self._entries = {}

    def get(self, key):
        with self._lock:
            self._load()
            return self._entries.get(key)

    def entries(self):
        with self._lock:
            self._load()
            return dict(self._entries)

    def put(self, key, entry):
        """Keeps `entry` in memory and merges it into the file."""
        with self._lock:
            self._load()
            self._entries[key] = entry
            if not self._writable:
                return
            try:
                self._merge_into_file({key: entry})
            except OSError as error:
                self._writable = False
                self._warn(f"cannot write the decisions cache in {directory()} ({error}); "
                           "decisions are kept in memory for this process only")

    def _merge_into_file(self, new_entries):
        os.makedirs(os.path.dirname(self._path), exist_ok=True)
        with _locked(os.path.dirname(self._path)):
            try:
                on_disk = read_entries(self._path)
            except UnreadableFile:
                os.replace(self._path, self._path + ".corrupt")
                on_disk = {}
            merged = {**on_disk, **self._entries, **new_entries}
            _write_atomically(self._path, merged)
        self._entries = merged

    def clear(self):
        """Forgets every decision, in memory and in the file."""
        with self._lock:
            self._entries, self._path = {}, path()
            with contextlib.suppress(FileNotFoundError):
                with _locked(os.path.dirname(self._path)):
                    os.unlink(self._path)
