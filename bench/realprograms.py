"""What bench/instructions and bench/alloctime share: bench/run as a module,
which objects are each allocator's code, and the real programs they run."""
import importlib.machinery
import importlib.util
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def _load_run():
    loader = importlib.machinery.SourceFileLoader("bench_run", os.path.join(HERE, "run"))
    spec = importlib.util.spec_from_loader("bench_run", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


# bench/run: its allocators, environment and workload files.
RUN = _load_run()

# Object basenames whose code is the allocator (glibc: only its malloc code
# inside libc; each tool says how it tells that code apart).
ALLOCATOR_OBJECTS = {
    "glibc": ["libc.so.6"],
    "jemalloc": ["libjemalloc.so.2"],
    "memtier": ["libmemtier.so", "libmemkind.so"],
    "tiermalloc": ["libtiermalloc.so"],
}


def allocators(lib):
    """bench/run's allocators that have an ALLOCATOR_OBJECTS entry."""
    return [a for a in RUN.allocators(lib) if a.key in ALLOCATOR_OBJECTS]


def work(tmp, sql_rows, py_scale):
    """The real programs, as (key, title, argv, stdin path or None, extra env);
    sqlite only where sqlite3 is installed. Files go to tmp."""
    python, sqlite = RUN.find_python(), RUN.find_sqlite()
    out = []
    if sqlite:
        sql = os.path.join(tmp, "work.sql")
        RUN.write_sql(sql, sql_rows)
        out.append(("sqlite", "sqlite3 :memory:, %d rows" % sql_rows, [sqlite, ":memory:"], sql, {}))
    out.append(("python", "CPython, PYTHONMALLOC=malloc, pywork scale %d" % py_scale,
                [python, os.path.join(HERE, "pywork.py"), str(py_scale), os.path.join(tmp, "py.out")],
                None, {"PYTHONMALLOC": "malloc"}))
    return out
