"""Write a file so that readers only ever see the old version or the whole new one.

The data goes to a temporary file in the same folder, which is flushed, fsynced and then renamed over the
target with ``os.replace`` (atomic on POSIX and Windows). If anything fails or is interrupted on the way (a full
disk, Ctrl-C), the temporary file is removed and the old file is untouched. A symbolic link at the target is
refused, never followed: a link planted in an output folder must not redirect a write elsewhere.

Standard library only: the engine-free parts of gradviz (tracing, the CLI) both use it.
"""

import contextlib
import errno
import os
import stat
import tempfile

# temporary files are named ``.<target>.<random>.gradviz-tmp``: hidden, and recognisable as gradviz's own
TEMP_SUFFIX = ".gradviz-tmp"


class SymlinkRefused(OSError):
    """The target path is a symbolic link; gradviz does not write through links."""

    def __init__(self, path):
        super().__init__(errno.ELOOP, "is a symbolic link; gradviz does not write through links "
                                      "(remove it and run again)", os.fspath(path))


def check_not_symlink(path):
    """Raise ``SymlinkRefused`` if ``path`` exists as a symbolic link (checked with ``lstat``, never followed)."""
    try:
        if stat.S_ISLNK(os.lstat(path).st_mode):
            raise SymlinkRefused(path)
    except FileNotFoundError:
        pass


class Staged:
    """A new version of ``path`` written to a temporary file beside it: ``commit()`` fsyncs it and renames it
    over ``path``; ``discard()`` deletes it. Staging several files and committing them together keeps a reader
    from seeing one file of the new run beside another of the old one when a write fails halfway."""

    def __init__(self, path, mode="w", encoding="utf-8", errors=None):
        if mode not in ("w", "wb"):
            raise ValueError(f"atomic writes take mode 'w' or 'wb', not {mode!r}")
        self.path = os.fspath(path)
        check_not_symlink(self.path)
        folder, name = os.path.split(os.path.abspath(self.path))
        self.folder = folder
        self.temp = self.file = fd = None
        try:
            # mkstemp opens with O_CREAT | O_EXCL (and O_NOFOLLOW where the platform has it): never an existing file
            fd, self.temp = tempfile.mkstemp(prefix=f".{name}.", suffix=TEMP_SUFFIX, dir=folder)
            if mode == "wb":
                self.file = os.fdopen(fd, "wb")
            else:
                self.file = os.fdopen(fd, "w", encoding=encoding, errors=errors, newline="")
        except BaseException:  # Ctrl-C may land inside mkstemp, after it created the file: discard finds it
            if self.file is None and fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
            self.discard()
            raise

    def sync(self):
        """Flush and fsync the temporary file and close it (a full disk shows up here at the latest)."""
        if not self.file.closed:
            with self.file:
                self.file.flush()
                os.fsync(self.file.fileno())

    def commit(self):
        """Rename the finished temporary file over ``path``; a link planted meanwhile is refused."""
        try:
            self.sync()
            _keep_mode(self.path, self.temp)
            check_not_symlink(self.path)
            os.replace(self.temp, self.path)
        except BaseException:
            self.discard()
            raise
        _fsync_folder(self.folder)

    def discard(self):
        """Delete the temporary file; ``path`` keeps its old content."""
        f = getattr(self, "file", None)
        if f is not None and not f.closed:
            with contextlib.suppress(OSError):
                f.close()
        if self.temp is None:  # interrupted before mkstemp told us the name
            remove_temporaries(self.path)
            return
        with contextlib.suppress(OSError):
            os.unlink(self.temp)


def remove_temporaries(path):
    """Delete the temporary files staged for ``path`` (``.<name>.*.gradviz-tmp`` beside it), e.g. one whose
    name was lost to an interrupt."""
    folder, name = os.path.split(os.path.abspath(os.fspath(path)))
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        if entry.name.startswith(f".{name}.") and entry.name.endswith(TEMP_SUFFIX):
            with contextlib.suppress(OSError):
                if entry.is_file(follow_symlinks=False):
                    os.unlink(entry.path)


@contextlib.contextmanager
def atomic_open(path, mode="w", encoding="utf-8", errors=None):
    """Open a temporary file beside ``path`` for writing; on a clean exit it replaces ``path`` atomically.

    ``mode`` is ``"w"`` (text, ``encoding``) or ``"wb"``. On any exception, including ``KeyboardInterrupt``,
    the temporary file is deleted, ``path`` keeps its old content, and the exception propagates.
    """
    staged = None
    try:
        staged = Staged(path, mode, encoding, errors)
        yield staged.file
    except BaseException:
        if staged is not None:
            staged.discard()
        else:  # Staged cleans up after itself, unless the interrupt came just as it returned
            remove_temporaries(path)
        raise
    staged.commit()


def write_bytes(path, data):
    """Write ``data`` to ``path`` atomically (see ``atomic_open``)."""
    with atomic_open(path, "wb") as f:
        f.write(data)


def write_text(path, text, encoding="utf-8", errors=None):
    """Write ``text`` to ``path`` atomically (see ``atomic_open``)."""
    with atomic_open(path, "w", encoding=encoding, errors=errors) as f:
        f.write(text)


def _keep_mode(path, temp):
    """The new file gets the old file's permissions, or the usual ones for a new file (mkstemp makes 0600)."""
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        mode = 0o666 & ~_umask()
    os.chmod(temp, mode)


def _umask():
    """The process's umask, read without changing it where Linux allows (another thread may be creating files)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    umask = os.umask(0o022)
    os.umask(umask)
    return umask


def _fsync_folder(folder):
    """Make the rename itself durable (POSIX); a no-op where folders cannot be opened."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
