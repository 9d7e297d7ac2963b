#!/usr/bin/env python3
"""Checks docs/: the Kubernetes manifests, the Prometheus rules, the systemd
units, the textfile script, and tiermalloc's Prometheus exposition (a
validator of the text format, run on tests/docs/sample.prom and, with
--live, on build/tierctl's output for a process it starts under the library).

  python3 tests/docs/check.py [--live]    every check; one line per failure,
                                          then "docs: ok, N checks"; exit 1 on any failure
  python3 tests/docs/check.py --prom FILE validate one exposition file
  python3 tests/docs/check.py --write-sample
                                          regenerate tests/docs/sample.prom from two
                                          processes run under build/libtiermalloc.so

Python 3 standard library, and PyYAML (Debian: python3-yaml). Optional, used
when found: promtool (Debian: prometheus; make deps installs it) tests the alert rules on synthetic
series; prometheus-node-exporter (or node_exporter) reads the file the
textfile script writes; systemd-analyze verifies the units.
"""
import configparser
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOCS = os.path.join(ROOT, "docs")
SAMPLE = os.path.join(ROOT, "tests", "docs", "sample.prom")
TIERCTL = os.path.join(ROOT, "build", "tierctl")
LIB = os.path.join(ROOT, "build", "libtiermalloc.so")
PROMDIR = os.path.join(DOCS, "prometheus")
SCRIPT = os.path.join(PROMDIR, "tiermalloc-textfile.sh")
RULES = os.path.join(PROMDIR, "alerts.yml")
K8SDIR = os.path.join(DOCS, "kubernetes")


def import_yaml():
    try:
        import yaml
        return yaml
    except ImportError:
        pass
    # Debian's python3-yaml is for /usr/bin/python3; PATH's python3 may be another.
    sysp = "/usr/bin/python3"
    if (os.path.exists(sysp) and os.path.realpath(sys.executable) != os.path.realpath(sysp)
            and not os.environ.get("TM_DOCS_REEXEC")):
        os.environ["TM_DOCS_REEXEC"] = "1"
        os.execv(sysp, [sysp] + sys.argv)
    print("docs: PyYAML is missing (Debian package python3-yaml)")
    sys.exit(1)


# ---- the checks' bookkeeping ----------------------------------------------------

class Checks:
    def __init__(self):
        self.n = 0
        self.failed = 0
        self.skipped = []

    def ok(self, cond, msg):
        """One check: cond true passes; else msg is printed as one line."""
        self.n += 1
        if not cond:
            self.failed += 1
            print("FAIL: " + " ".join(str(msg).split("\n")))
        return bool(cond)

    def errors(self, errs, what):
        """One check that a list of problems is empty; each problem is a line."""
        self.n += 1
        if errs:
            self.failed += 1
            for e in errs:
                print("FAIL: %s: %s" % (what, e))
        return not errs


# ---- the Prometheus text format (0.0.4) -----------------------------------------

METRIC_RE = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
LABEL_RE = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
VALUE_RE = re.compile(r"(?:[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]Inf|NaN)\Z")
TIMESTAMP_RE = re.compile(r"-?[0-9]+\Z")
META_RE = re.compile(r"#[ \t]+(HELP|TYPE)(?:[ \t]+(.*))?\Z")
TYPES = ("counter", "gauge", "histogram", "summary", "untyped")
SUFFIXES = {"histogram": ("_bucket", "_sum", "_count"), "summary": ("_sum", "_count")}


class Family:
    def __init__(self, name):
        self.name = name
        self.type = None
        self.help = None
        self.samples = []   # (name, {label: value}, value string, line number)
        self.series = {}    # (name, sorted labels): line number


def _parse_labels(line, i, lineno, errs):
    """line[i] is '{'. Returns (labels, index after '}') or (None, _)."""
    labels = {}
    i += 1
    n = len(line)

    def blanks(j):
        while j < n and line[j] in " \t":
            j += 1
        return j

    while True:
        i = blanks(i)
        if i < n and line[i] == "}":
            return labels, i + 1
        m = LABEL_RE.match(line, i)
        if not m:
            errs.append("line %d: bad label name at column %d" % (lineno, i + 1))
            return None, i
        name = m.group()
        i = blanks(m.end())
        if i >= n or line[i] != "=":
            errs.append("line %d: '=' expected after label %s" % (lineno, name))
            return None, i
        i = blanks(i + 1)
        if i >= n or line[i] != '"':
            errs.append("line %d: '\"' expected for the value of label %s" % (lineno, name))
            return None, i
        i += 1
        value = []
        while True:
            if i >= n:
                errs.append("line %d: the value of label %s is not terminated" % (lineno, name))
                return None, i
            c = line[i]
            if c == '"':
                i += 1
                break
            if c == "\\":
                if i + 1 >= n or line[i + 1] not in '\\"n':
                    esc = line[i:i + 2]
                    errs.append("line %d: invalid escape %r in the value of label %s" % (lineno, esc, name))
                    return None, i
                value.append({"\\": "\\", '"': '"', "n": "\n"}[line[i + 1]])
                i += 2
                continue
            value.append(c)
            i += 1
        if name.startswith("__"):
            errs.append("line %d: label name %s is reserved (starts with __)" % (lineno, name))
        if name in labels:
            errs.append("line %d: label %s given twice" % (lineno, name))
        labels[name] = "".join(value)
        i = blanks(i)
        if i < n and line[i] == ",":
            i += 1
            continue
        if i < n and line[i] == "}":
            return labels, i + 1
        errs.append("line %d: ',' or '}' expected after label %s" % (lineno, name))
        return None, i


def parse_prom(text):
    """Validates text as the Prometheus text exposition format. Returns
    (errors, families by name); each error is a one-line string."""
    errs = []
    fams = {}
    order = []
    if text == "":
        return ["empty"], fams
    if not text.endswith("\n"):
        errs.append("the last line does not end with a newline")
    current = None
    closed = set()

    def enter(name, lineno, what):
        nonlocal current
        if name != current:
            if name in closed:
                errs.append("line %d: %s of %s after other families: a family's lines must be together"
                            % (lineno, what, name))
            if current is not None:
                closed.add(current)
            current = name
        if name not in fams:
            fams[name] = Family(name)
            order.append(name)
        return fams[name]

    def family_of(name):
        if name in fams and fams[name].type is not None:
            return name
        for typ, sufs in SUFFIXES.items():
            for s in sufs:
                base = name[: -len(s)]
                if name.endswith(s) and base in fams and fams[base].type == typ:
                    return base
        return name

    for lineno, line in enumerate(text.split("\n")[:-1] if text.endswith("\n") else text.split("\n"), 1):
        if "\r" in line:
            errs.append("line %d: carriage return" % lineno)
            continue
        if line.strip(" \t") == "":
            continue
        if line.startswith("#"):
            m = META_RE.match(line)
            if not m:
                continue            # a plain comment
            kind, rest = m.group(1), m.group(2) or ""
            parts = rest.split(None, 1) if kind == "HELP" else rest.split()
            if not parts or not METRIC_RE.fullmatch(parts[0]):
                errs.append("line %d: %s without a valid metric name" % (lineno, kind))
                continue
            name = parts[0]
            fam = enter(name, lineno, kind)
            if kind == "HELP":
                doc = parts[1] if len(parts) > 1 else ""
                bad = re.search(r"\\(?:[^\\n]|\Z)", doc.replace("\\\\", ""))
                if bad:
                    errs.append("line %d: invalid escape %r in the HELP of %s" % (lineno, bad.group(), name))
                if fam.help is not None:
                    errs.append("line %d: second HELP for %s" % (lineno, name))
                elif fam.samples:
                    errs.append("line %d: HELP for %s after its samples" % (lineno, name))
                fam.help = doc
            else:
                if len(parts) != 2 or parts[1] not in TYPES:
                    errs.append("line %d: TYPE of %s is %r, not one of %s"
                                % (lineno, name, " ".join(parts[1:]), ", ".join(TYPES)))
                    continue
                if fam.type is not None:
                    errs.append("line %d: second TYPE for %s" % (lineno, name))
                elif fam.samples:
                    errs.append("line %d: TYPE for %s after its samples" % (lineno, name))
                else:
                    fam.type = parts[1]
                if parts[1] == "counter" and not name.endswith("_total"):
                    errs.append("line %d: counter %s does not end in _total" % (lineno, name))
            continue
        m = METRIC_RE.match(line)
        if not m:
            errs.append("line %d: bad metric name" % lineno)
            continue
        name = m.group()
        i = m.end()
        labels = {}
        if i < len(line) and line[i] == "{":
            labels, i = _parse_labels(line, i, lineno, errs)
            if labels is None:
                continue
        rest = line[i:]
        if not rest or rest[0] not in " \t":
            errs.append("line %d: a blank and a value expected after %s" % (lineno, name))
            continue
        fields = rest.split()
        if len(fields) not in (1, 2):
            errs.append("line %d: %d fields after the labels (a value and an optional timestamp)"
                        % (lineno, len(fields)))
            continue
        value = fields[0]
        if not VALUE_RE.match(value):
            errs.append("line %d: value %r of %s is not a number (nor +Inf, -Inf, NaN)" % (lineno, value, name))
            continue
        if len(fields) == 2 and not TIMESTAMP_RE.match(fields[1]):
            errs.append("line %d: timestamp %r is not an integer" % (lineno, fields[1]))
            continue
        fam = enter(family_of(name), lineno, "a sample")
        if fam.type == "counter" and value.startswith("-") and value != "-0":
            errs.append("line %d: counter %s is negative (%s)" % (lineno, name, value))
        key = (name, tuple(sorted(labels.items())))
        if key in fam.series:
            errs.append("line %d: the same series as line %d" % (lineno, fam.series[key]))
        fam.series.setdefault(key, lineno)
        fam.samples.append((name, labels, value, lineno))
    return errs, {n: fams[n] for n in order}


def read_text(path):
    with open(path, "rb") as f:
        data = f.read()
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as e:
        return None, "not UTF-8 (%s)" % e


# ---- what tiermalloc's exposition promises -------------------------------------

PROC = ["pid", "command"]
TIER = PROC + ["tier", "nodes"]
# family: (type, label names). TiermallocTopTierAboveHigh compares resident
# with budget ignoring(limit, source): their labels differ by those two only.
EXPECTED = {
    "tiermalloc_info": ("gauge", PROC + ["cgroup", "reclaim_mode", "cold_signal", "stats_version"]),
    "tiermalloc_reclaim_state": ("gauge", PROC + ["state"]),
    "tiermalloc_reclaim_passes_total": ("counter", PROC),
    "tiermalloc_reclaim_cpu_seconds_total": ("counter", PROC),
    "tiermalloc_tier_capacity_bytes": ("gauge", TIER),
    "tiermalloc_tier_committed_bytes": ("gauge", TIER),
    "tiermalloc_tier_used_bytes": ("gauge", TIER),
    "tiermalloc_tier_allocated_bytes": ("gauge", TIER),
    "tiermalloc_tier_resident_bytes": ("gauge", TIER),
    "tiermalloc_tier_demoted_bytes_total": ("counter", TIER),
    "tiermalloc_tier_promoted_bytes_total": ("counter", TIER),
    "tiermalloc_tier_pageout_bytes_total": ("counter", TIER),
    "tiermalloc_tier_budget_bytes": ("gauge", TIER + ["limit", "source"]),
    "tiermalloc_tier_max_held": ("gauge", TIER),
    "tiermalloc_numa_balancing": ("gauge", PROC + ["mode", "policies", "heap", "demotes"]),
    "tiermalloc_record_age_seconds": ("gauge", PROC),
    "tiermalloc_record_interval_seconds": ("gauge", PROC),
    "tiermalloc_resident_age_seconds": ("gauge", PROC),
}


def tiermalloc_problems(fams, pids=None):
    """The promises alerts.yml and the docs rely on. pids: processes that must
    be there (None: whatever the file has)."""
    p = []
    for name, (typ, labels) in EXPECTED.items():
        if name not in fams:
            p.append("no family %s" % name)
            continue
        f = fams[name]
        if f.type != typ:
            p.append("%s is a %s, not a %s" % (name, f.type, typ))
        if not f.help:
            p.append("%s has no HELP" % name)
        for s in f.samples:
            if set(s[1]) != set(labels):
                p.append("line %d: %s has labels %s, not %s" % (s[3], name, sorted(s[1]), sorted(labels)))
                break
    for name, f in fams.items():
        if not name.startswith("tiermalloc_"):
            p.append("family %s is not tiermalloc_*" % name)
        for s in f.samples:
            if name.endswith("_bytes") and not (s[2].isdigit() or (name == "tiermalloc_tier_budget_bytes"
                                                                     and s[2] == "+Inf")):
                p.append("line %d: %s = %s, not a whole number of bytes" % (s[3], name, s[2]))
            if "pid" not in s[1]:
                p.append("line %d: %s has no pid label" % (s[3], name))
    if p:
        return p
    info_pids = {s[1]["pid"] for s in fams["tiermalloc_info"].samples}
    if pids is not None and not set(pids) <= info_pids:
        p.append("processes %s missing (the file has %s)" % (sorted(set(pids) - info_pids), sorted(info_pids)))
    for s in fams["tiermalloc_info"].samples:
        if s[2] != "1":
            p.append("line %d: tiermalloc_info = %s, not 1" % (s[3], s[2]))
    for name, f in fams.items():
        if f.samples and {s[1]["pid"] for s in f.samples} != info_pids:
            p.append("%s does not have every process of tiermalloc_info" % name)
    tiers = {(s[1]["pid"], s[1]["tier"]) for s in fams["tiermalloc_tier_resident_bytes"].samples}
    limits = {}
    for s in fams["tiermalloc_tier_budget_bytes"].samples:
        limits.setdefault((s[1]["pid"], s[1]["tier"]), []).append(s[1]["limit"])
    for k in sorted(tiers):
        if sorted(limits.get(k, [])) != ["high", "low", "max", "min"]:
            p.append("pid %s tier %s: budget limits %s, not min, low, high, max" % (k + (limits.get(k),)))
    for s in fams["tiermalloc_tier_max_held"].samples:
        if s[2] not in ("0", "1"):
            p.append("line %d: tiermalloc_tier_max_held = %s, not 0 or 1" % (s[3], s[2]))
    for s in fams["tiermalloc_reclaim_state"].samples:
        if s[2] != "1":
            p.append("line %d: tiermalloc_reclaim_state = %s, not 1" % (s[3], s[2]))
    return p


def check_prom_text(c, text, what, pids=None):
    errs, fams = parse_prom(text)
    if c.errors(errs, what):
        c.errors(tiermalloc_problems(fams, pids), what)
    return fams


# ---- the validator's own tests ----------------------------------------------------

GOOD = """# a comment
# HELP a_total a counter, with \\\\ and \\n escaped
# TYPE a_total counter
a_total{x="q\\"uote",y="back\\\\slash",z="new\\nline"} 1e3
a_total{x="",y="",z="",} 0 1700000000000
# TYPE g gauge
g +Inf
g{k="v"} -Inf
g{ k = "w" } NaN
# HELP h a histogram
# TYPE h histogram
h_bucket{le="1"} 0
h_bucket{le="+Inf"} 2
h_sum 3.5
h_count 2

u{a="b"} .5
"""


def mutations(sample):
    """(name, broken text, what the error says): each must be caught."""
    lines = sample.split("\n")
    first_type = next(i for i, l in enumerate(lines) if l.startswith("# TYPE "))
    first_sample = next(i for i, l in enumerate(lines) if l and not l.startswith("#"))
    fam = lines[first_sample].split("{")[0]
    sample_line = lines[first_sample]
    budget = next(l for l in lines if l.startswith("tiermalloc_tier_budget_bytes{"))
    counter = next(l for l in lines if l.startswith("# TYPE ") and l.endswith(" counter")).split()[2]
    m = []

    def add(name, new_lines, expect):
        m.append((name, "\n".join(new_lines), expect))

    add("duplicated TYPE", lines[:first_type + 1] + [lines[first_type]] + lines[first_type + 1:], "second TYPE")
    add("duplicated HELP", lines[:first_type] + [lines[first_type - 1]] + lines[first_type:], "second HELP")
    add("TYPE after samples", lines + [l for l in lines if l.startswith("# TYPE " + fam + " ")] + [""],
        "TYPE for")
    add("a bad label escape", [l.replace('command="', 'command="\\t', 1) for l in lines], "invalid escape")
    add("an unterminated label value", [l if l != sample_line else sample_line.split('"}')[0] + " 1"
                                        for l in lines], "not terminated")
    add("a family's samples apart", lines[:-1] + [sample_line, ""], "must be together")
    add("a counter without _total", [l.replace(counter + " ", counter[:-6] + " ").replace(counter + "{", counter[:-6] + "{")
                                     for l in lines], "does not end in _total")
    add("a bad metric name", lines[:-1] + ["0bad 1", ""], "bad metric name")
    add("a bad value", [l if l != budget else budget.rsplit(" ", 1)[0] + " 12abc" for l in lines], "not a number")
    add("Python's inf", [l if l != budget else budget.rsplit(" ", 1)[0] + " inf" for l in lines], "not a number")
    add("an unknown TYPE", [l.replace(" gauge", " gauges", 1) if l.startswith("# TYPE") else l for l in lines],
        "not one of")
    add("no newline at the end", lines[:-1], "newline")
    add("a reserved label name", [l.replace("{pid=", "{__pid=", 1) if l == sample_line else l for l in lines],
        "reserved")
    add("a label name given twice", [l.replace("{pid=", '{command="x",pid=', 1) if l == sample_line else l
                                     for l in lines], "given twice")
    add("a label name that is not one", [l.replace("{pid=", "{1pid=", 1) if l == sample_line else l for l in lines],
        "bad label name")
    add("the same series twice", lines[:first_sample + 1] + [sample_line] + lines[first_sample + 1:], "same series")
    add("other label names in a family", lines[:first_sample + 1]
        + [sample_line.replace("{pid=", '{extra="1",pid=', 1).replace('pid="', 'pid="9', 1)]
        + lines[first_sample + 1:], "has labels")
    add("a HELP with a bad escape", [l + " \\x" if i == first_type - 1 else l for i, l in enumerate(lines)],
        "invalid escape")
    add("a value and three fields", [l + " 1 2" if l == sample_line else l for l in lines], "fields")
    add("a carriage return", [l + "\r" if l == sample_line else l for l in lines], "carriage return")
    return m


def check_validator(c, sample):
    errs, fams = parse_prom(GOOD)
    c.errors(errs, "the validator on valid edge cases")
    c.ok(sorted(fams) == ["a_total", "g", "h", "u"], "the validator's families of GOOD: %s" % sorted(fams))
    c.ok(fams["a_total"].samples and fams["a_total"].samples[0][1]["x"] == 'q"uote'
         and fams["a_total"].samples[0][1]["z"] == "new\nline", "the validator unescapes label values")
    for name, text, expect in mutations(sample):
        errs, fams = parse_prom(text)
        errs = errs or tiermalloc_problems(fams)
        c.ok(any(expect in e for e in errs),
             "the validator misses %s (expected %r; it said %s)" % (name, expect, errs[:3] or "nothing"))


# ---- YAML: every file, the manifests, the rules ------------------------------------

def yaml_files():
    out = []
    for d, _, files in os.walk(DOCS):
        out += [os.path.join(d, f) for f in files if f.endswith((".yaml", ".yml"))]
    return sorted(out)


def check_yaml(c, yaml):
    loaded = {}
    files = yaml_files()
    c.ok(len(files) >= 4, "expected the Kubernetes manifests and alerts.yml under docs/, found %s" % files)
    for path in files:
        rel = os.path.relpath(path, ROOT)
        try:
            with open(path) as f:
                docs = [d for d in yaml.safe_load_all(f)]
        except yaml.YAMLError as e:
            c.ok(False, "%s does not parse: %s" % (rel, e))
            continue
        c.ok(docs and all(isinstance(d, dict) for d in docs), "%s: every document is a mapping" % rel)
        loaded[path] = docs
    return loaded


def pod_spec(doc):
    kind = doc.get("kind")
    if kind == "Pod":
        return doc.get("spec") or {}
    if kind in ("DaemonSet", "Deployment", "StatefulSet", "ReplicaSet", "Job"):
        return ((doc.get("spec") or {}).get("template") or {}).get("spec") or {}
    return None


def check_manifests(c, loaded):
    ds_hostpath, ds_script, preload_rel = None, "", []
    for path, docs in loaded.items():
        if not path.startswith(K8SDIR + os.sep):
            continue
        rel = os.path.relpath(path, ROOT)
        for doc in docs:
            if not isinstance(doc, dict):
                continue
            meta = doc.get("metadata") or {}
            c.ok(doc.get("apiVersion") and doc.get("kind") and meta.get("name"),
                 "%s: a document without apiVersion, kind or metadata.name" % rel)
            spec = pod_spec(doc)
            if spec is None:
                continue
            if doc["kind"] != "Pod":
                sel = ((doc.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
                tl = (((doc.get("spec") or {}).get("template") or {}).get("metadata") or {}).get("labels") or {}
                c.ok(sel and all(tl.get(k) == v for k, v in sel.items()),
                     "%s: the selector does not match the template's labels" % rel)
            volumes = {v.get("name"): v for v in spec.get("volumes") or []}
            containers = (spec.get("initContainers") or []) + (spec.get("containers") or [])
            c.ok(containers, "%s: no containers" % rel)
            for ct in containers:
                cname = ct.get("name")
                c.ok(cname and ct.get("image"), "%s: a container without a name or an image" % rel)
                mounts = ct.get("volumeMounts") or []
                for vm in mounts:
                    c.ok(vm.get("name") in volumes, "%s: container %s mounts volume %s, which the pod does not have"
                         % (rel, cname, vm.get("name")))
                env = {e.get("name"): e.get("value") for e in ct.get("env") or []}
                c.ok(all(isinstance(v, str) for v in env.values()),
                     "%s: container %s: every env value is a string (quote numbers)" % (rel, cname))
                if doc["kind"] == "DaemonSet":
                    for vm in mounts:
                        hp = (volumes.get(vm.get("name")) or {}).get("hostPath")
                        if hp:
                            ds_hostpath = hp.get("path")
                    ds_script += " ".join(ct.get("command") or [])
                if "LD_PRELOAD" not in env:
                    continue
                lp = env["LD_PRELOAD"]
                mount = next((vm for vm in mounts if lp.startswith(vm.get("mountPath", "").rstrip("/") + "/")), None)
                c.ok(mount is not None, "%s: container %s: LD_PRELOAD=%s is under none of its mounts" % (rel, cname, lp))
                if mount is None:
                    continue
                hp = (volumes.get(mount.get("name")) or {}).get("hostPath") or {}
                c.ok(hp.get("path") and mount.get("readOnly") is True,
                     "%s: container %s: the library's volume is not a hostPath mounted readOnly" % (rel, cname))
                c.ok(hp.get("type") == "Directory",
                     "%s: container %s: hostPath type Directory, so a node without it fails visibly" % (rel, cname))
                lim = ((ct.get("resources") or {}).get("limits") or {}).get("memory")
                c.ok(lim, "%s: container %s: no resources.limits.memory (memory.max, the budgets' source)"
                     % (rel, cname))
                preload_rel.append((rel, hp.get("path"), lp[len(mount["mountPath"].rstrip("/")) + 1:]))
            # Containers that write records (LD_PRELOAD) and read them (tierctl).
            envs = [{e.get("name"): e.get("value") for e in ct.get("env") or []} for ct in containers]
            writers = [i for i, e in enumerate(envs) if "LD_PRELOAD" in e]
            readers = [i for i, ct in enumerate(containers) if "tierctl" in " ".join(
                [str(v) for v in envs[i].values()] + list(ct.get("command") or []))]
            if len(writers) + len(readers) > 1 and doc["kind"] == "Pod":
                c.ok(spec.get("shareProcessNamespace") is True,
                     "%s: records are written or read in more than one container: shareProcessNamespace must be "
                     "true (else tierctl and the library take them for stale ones and remove them)" % rel)
                dirs = {envs[i].get("TIERMALLOC_LIVE_DIR") for i in writers + readers}
                vols = {next((vm.get("name") for vm in containers[i].get("volumeMounts") or []
                              if vm.get("mountPath") == envs[i].get("TIERMALLOC_LIVE_DIR")), None)
                        for i in writers + readers}
                c.ok(len(dirs) == 1 and len(vols) == 1 and None not in vols,
                     "%s: the containers that write and read records do not mount one volume at one "
                     "TIERMALLOC_LIVE_DIR: %s, volumes %s" % (rel, dirs, vols))
                c.ok(not set(writers) & set(readers), "%s: a container runs tierctl with LD_PRELOAD" % rel)
    c.ok(preload_rel, "no manifest preloads the library")
    for rel, hostpath, file in preload_rel:
        c.ok(ds_hostpath == hostpath and file in ds_script,
             "%s: LD_PRELOAD's %s in hostPath %s is not what daemonset.yaml installs (%s)"
             % (rel, file, hostpath, ds_hostpath))
    for f in ("bin/tierctl", "bin/tiermalloc-textfile.sh"):
        c.ok(f in ds_script, "daemonset.yaml does not install %s" % f)


DURATION_RE = re.compile(r"(?:[0-9]+(?:ms|s|m|h|d|w|y))+\Z")
RULE_KEYS = {"alert", "record", "expr", "for", "keep_firing_for", "labels", "annotations"}
SELECTOR_RE = re.compile(r"\b(tiermalloc_[a-zA-Z0-9_]+|node_[a-zA-Z0-9_]+)\s*(\{([^}]*)\})?")
MATCHER_RE = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"(?:[^"\\]|\\.)*"\s*,?')


def check_rules(c, loaded, fams):
    rel = os.path.relpath(RULES, ROOT)
    docs = loaded.get(RULES)
    if not c.ok(docs and len(docs) == 1, "%s: one YAML document expected" % rel):
        return
    top = docs[0]
    groups = top.get("groups") if isinstance(top, dict) else None
    c.ok(isinstance(top, dict) and set(top) == {"groups"}, "%s: the top level has only groups" % rel)
    if not c.ok(isinstance(groups, list) and groups, "%s: groups is not a non-empty list" % rel):
        return
    alerts = {}
    for g in groups:
        c.ok(isinstance(g, dict) and isinstance(g.get("name"), str), "%s: a group without a name" % rel)
        rules = g.get("rules") if isinstance(g, dict) else None
        if not c.ok(isinstance(rules, list) and rules, "%s: group %s has no rules list" % (rel, g.get("name"))):
            continue
        for r in rules:
            if not c.ok(isinstance(r, dict), "%s: a rule is not a mapping" % rel):
                continue
            name = r.get("alert") or r.get("record")
            c.ok(("alert" in r) != ("record" in r), "%s: rule %s has neither or both of alert and record" % (rel, name))
            c.ok(set(r) <= RULE_KEYS, "%s: rule %s has unknown keys %s" % (rel, name, sorted(set(r) - RULE_KEYS)))
            c.ok(isinstance(r.get("expr"), str) and r["expr"].strip(), "%s: rule %s has no expr" % (rel, name))
            if "alert" in r:
                alerts[name] = r
                c.ok(isinstance(r.get("for"), str) and DURATION_RE.match(r["for"]),
                     "%s: alert %s: for %r is not a duration" % (rel, name, r.get("for")))
                for k in ("labels", "annotations"):
                    v = r.get(k, {})
                    c.ok(isinstance(v, dict) and all(isinstance(x, str) for x in v.values()),
                         "%s: alert %s: %s is not a mapping of strings" % (rel, name, k))
            expr = r.get("expr") or ""
            # Every tiermalloc metric it names, and every label it matches on, exists.
            for m in SELECTOR_RE.finditer(expr):
                metric = m.group(1)
                if metric.startswith("node_"):
                    continue
                if not c.ok(metric in fams, "%s: rule %s names %s, which tierctl does not print" % (rel, name, metric)):
                    continue
                have = set(fams[metric].samples[0][1]) if fams[metric].samples else set()
                for lm in MATCHER_RE.finditer(m.group(3) or ""):
                    c.ok(lm.group(1) in have, "%s: rule %s matches label %s, which %s does not have (%s)"
                         % (rel, name, lm.group(1), metric, sorted(have)))
            for m in re.finditer(r"\b(on|ignoring)\s*\(([^)]*)\)", expr):
                names = [x.strip() for x in m.group(2).split(",") if x.strip()]
                metrics = [x.group(1) for x in SELECTOR_RE.finditer(expr) if x.group(1) in fams]
                known = set().union(*[set(fams[x].samples[0][1]) for x in metrics if fams[x].samples]) | {
                    "instance", "job"}
                c.ok(all(x in known for x in names), "%s: rule %s: %s(%s) names labels its metrics do not have"
                     % (rel, name, m.group(1), ", ".join(names)))
    hi = alerts.get("TiermallocTopTierAboveHigh")
    if c.ok(hi, "%s: no alert TiermallocTopTierAboveHigh" % rel):
        c.ok(hi.get("for") == "5m", "%s: TiermallocTopTierAboveHigh: for is %r, not 5m" % (rel, hi.get("for")))
        e = " ".join(hi["expr"].split())
        c.ok('tiermalloc_tier_resident_bytes{tier="0"}' in e and 'limit="high"' in e
             and ("ignoring(limit, source)" in e or re.search(r"\bon\(", e)),
             "%s: TiermallocTopTierAboveHigh: resident on tier 0 against its high budget, with ignoring/on: %s"
             % (rel, e))
        m = re.search(r"\bon\s*\(([^)]*)\)", e)
        if m:   # on(): the series' identity, and instance, as several nodes have the same pids.
            c.ok({"pid", "command", "tier", "nodes", "instance"} <= {x.strip() for x in m.group(1).split(",")},
                 "%s: TiermallocTopTierAboveHigh: on(%s) lacks some of pid, command, tier, nodes, instance"
                 % (rel, m.group(1)))
    return alerts


def promtool_test(c, yaml, alerts):
    """The alert rules on synthetic series, with promtool (Debian: prometheus)."""
    promtool = shutil.which("promtool")
    if not promtool:
        c.skipped.append("promtool")
        return
    r = subprocess.run([promtool, "check", "rules", RULES], capture_output=True, text=True)
    c.ok(r.returncode == 0, "promtool check rules: %s" % (r.stdout + r.stderr).strip())
    # Annotations are left out: the test is about expr, for and labels.
    with open(RULES) as f:
        rules = yaml.safe_load(f)
    for g in rules["groups"]:
        for rule in g["rules"]:
            rule.pop("annotations", None)

    def series(metric, labels, values):
        return {"series": "%s{%s}" % (metric, ",".join('%s="%s"' % kv for kv in labels.items())), "values": values}

    def who(inst, pid, **extra):
        """A process's labels; tier=None: a per-process series (no tier, no nodes)."""
        d = {"instance": inst, "job": "node", "pid": pid, "command": "app", "tier": "0", "nodes": "0"}
        d.update(extra)
        if d.get("tier") is None:
            del d["tier"], d["nodes"]
        return d

    inputs = [
        # n1 pid 42: 200 resident against high 100, from the start: fires after 5m.
        series("tiermalloc_tier_resident_bytes", who("n1:9100", "42"), "200x10"),
        series("tiermalloc_tier_budget_bytes", who("n1:9100", "42", limit="high", source="cgroup v2"), "100x10"),
        series("tiermalloc_tier_budget_bytes", who("n1:9100", "42", limit="max", source="cgroup v2"), "1000x10"),
        # n2 pid 42 (same pid on another node): below its high. Matching across
        # nodes would either fire it or fail as many-to-many.
        series("tiermalloc_tier_resident_bytes", who("n2:9100", "42"), "50x10"),
        series("tiermalloc_tier_budget_bytes", who("n2:9100", "42", limit="high", source="cgroup v2"), "100x10"),
        series("tiermalloc_tier_budget_bytes", who("n2:9100", "42", limit="max", source="cgroup v2"), "1000x10"),
        # n1 pid 7: unlimited high (+Inf) never fires.
        series("tiermalloc_tier_resident_bytes", who("n1:9100", "7"), "1e12x10"),
        series("tiermalloc_tier_budget_bytes", who("n1:9100", "7", limit="high", source="none"), " ".join(["Inf"] * 11)),
        # max held: pid 42 on n1 not held from minute 2.
        series("tiermalloc_tier_max_held", who("n1:9100", "42"), "1 1 0x8"),
        series("tiermalloc_tier_max_held", who("n2:9100", "42"), "1x10"),
        # n1 rewrites its file every minute; n2's stopped at 0 (a bare file name).
        series("node_textfile_mtime_seconds", {"instance": "n1:9100", "job": "node",
               "file": "/var/lib/prometheus/node-exporter/tiermalloc.prom"}, "0+60x10"),
        series("node_textfile_mtime_seconds", {"instance": "n2:9100", "job": "node", "file": "tiermalloc.prom"},
               "0x10"),
        # Ages (one series per process, no tier label). n1 pid 42: published
        # every 0.1 s and fresh. n1 pid 43: stopped from minute 1, its age
        # growing 60 s a minute. n1 pid 44: no thread (interval 0) and an old
        # record: nothing to say. n2 pid 42: resident from the process itself,
        # 30 s old, then 90 s from minute 3 on.
        series("tiermalloc_record_age_seconds", who("n1:9100", "42", tier=None), "0.05x10"),
        series("tiermalloc_record_interval_seconds", who("n1:9100", "42", tier=None), "0.1x10"),
        series("tiermalloc_resident_age_seconds", who("n1:9100", "42", tier=None), "0x10"),
        series("tiermalloc_record_age_seconds", who("n1:9100", "43", tier=None), "0.05 0+60x9"),
        series("tiermalloc_record_interval_seconds", who("n1:9100", "43", tier=None), "0.1x10"),
        series("tiermalloc_resident_age_seconds", who("n1:9100", "43", tier=None), "0x10"),
        series("tiermalloc_record_age_seconds", who("n1:9100", "44", tier=None), "3600+60x10"),
        series("tiermalloc_record_interval_seconds", who("n1:9100", "44", tier=None), "0x10"),
        series("tiermalloc_resident_age_seconds", who("n1:9100", "44", tier=None), "0x10"),
        series("tiermalloc_record_age_seconds", who("n2:9100", "42", tier=None), "0.05x10"),
        series("tiermalloc_record_interval_seconds", who("n2:9100", "42", tier=None), "0.1x10"),
        series("tiermalloc_resident_age_seconds", who("n2:9100", "42", tier=None), "30 30 30 90x7"),
    ]
    fired = dict(who("n1:9100", "42"), severity="warning")
    tests = [
        {"eval_time": "4m", "alertname": "TiermallocTopTierAboveHigh", "exp_alerts": []},
        {"eval_time": "6m", "alertname": "TiermallocTopTierAboveHigh", "exp_alerts": [{"exp_labels": fired}]},
    ]
    if "TiermallocTierMaxNotHeld" in alerts:
        tests += [
            {"eval_time": "2m", "alertname": "TiermallocTierMaxNotHeld", "exp_alerts": []},
            {"eval_time": "4m", "alertname": "TiermallocTierMaxNotHeld",
             "exp_alerts": [{"exp_labels": dict(who("n1:9100", "42"), severity="critical")}]},
        ]
    if "TiermallocFiguresStale" in alerts:
        # pid 43 is late from minute 1 (age 60 s at minute 2, past 10 s and 3
        # intervals), firing 2 minutes later; n2's pid 42 from minute 3 + 2.
        late = dict(who("n1:9100", "43", tier=None), severity="warning")
        unmeasured = dict(who("n2:9100", "42", tier=None), severity="warning")
        tests += [
            {"eval_time": "2m", "alertname": "TiermallocFiguresStale", "exp_alerts": []},
            {"eval_time": "4m", "alertname": "TiermallocFiguresStale", "exp_alerts": [{"exp_labels": late}]},
            {"eval_time": "5m", "alertname": "TiermallocFiguresStale",
             "exp_alerts": [{"exp_labels": late}, {"exp_labels": unmeasured}]},
        ]
    if "TiermallocTextfileStale" in alerts:
        stale = {"instance": "n2:9100", "job": "node", "file": "tiermalloc.prom", "severity": "warning"}
        tests += [
            {"eval_time": "3m", "alertname": "TiermallocTextfileStale", "exp_alerts": []},
            {"eval_time": "5m", "alertname": "TiermallocTextfileStale", "exp_alerts": [{"exp_labels": stale}]},
        ]
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "rules.yml"), "w") as f:
            yaml.safe_dump(rules, f)
        with open(os.path.join(d, "test.yml"), "w") as f:
            yaml.safe_dump({"rule_files": ["rules.yml"], "evaluation_interval": "1m",
                            "tests": [{"interval": "1m", "input_series": inputs, "alert_rule_test": tests}]}, f)
        r = subprocess.run([promtool, "test", "rules", "test.yml"], cwd=d, capture_output=True, text=True)
        c.ok(r.returncode == 0, "promtool test rules (alerts.yml on synthetic series): %s"
             % " | ".join(l.strip() for l in (r.stdout + r.stderr).splitlines() if l.strip()))


# ---- systemd units ------------------------------------------------------------------

def read_unit(path):
    p = configparser.ConfigParser(strict=False, interpolation=None, delimiters=("=",),
                                  comment_prefixes=("#", ";"), empty_lines_in_values=False)
    p.optionxform = str
    with open(path) as f:
        p.read_file(f)
    return p


def check_units(c):
    svc_path = os.path.join(PROMDIR, "tiermalloc-textfile.service")
    tim_path = os.path.join(PROMDIR, "tiermalloc-textfile.timer")
    try:
        svc, tim = read_unit(svc_path), read_unit(tim_path)
    except (OSError, configparser.Error) as e:
        c.ok(False, "the systemd units do not parse: %s" % e)
        return
    c.ok(svc.has_section("Unit") and svc.has_section("Service"), "the service lacks [Unit] or [Service]")
    c.ok(svc.get("Service", "Type", fallback="") == "oneshot", "the service is not Type=oneshot")
    c.ok(svc.get("Service", "User", fallback="root") == "root", "the service does not run as root")
    exe = svc.get("Service", "ExecStart", fallback="").split()
    c.ok(exe and os.path.basename(exe[0]) == os.path.basename(SCRIPT), "ExecStart does not run %s: %s"
         % (os.path.basename(SCRIPT), exe))
    c.ok(len(exe) == 2 and exe[1] == "/var/lib/prometheus/node-exporter", "ExecStart's directory: %s" % exe[1:])
    rw = svc.get("Service", "ReadWritePaths", fallback="").lstrip("-")
    c.ok(svc.get("Service", "ProtectSystem", fallback="") != "strict" or (len(exe) == 2 and rw == exe[1]),
         "ProtectSystem=strict, but ReadWritePaths (%s) is not the directory written (%s)" % (rw, exe[1:]))
    c.ok(not svc.get("Service", "PrivateDevices", fallback="no").lower() in ("yes", "true", "1"),
         "PrivateDevices hides /dev/shm, where the records are")
    c.ok(tim.has_section("Unit") and tim.has_section("Timer") and tim.has_section("Install"),
         "the timer lacks [Unit], [Timer] or [Install]")
    c.ok(tim.get("Timer", "OnUnitActiveSec", fallback="") == "15s", "the timer does not run every 15s")
    c.ok(tim.get("Timer", "OnBootSec", fallback="") or tim.get("Timer", "OnActiveSec", fallback=""),
         "the timer has no first start (OnBootSec or OnActiveSec)")
    c.ok(tim.get("Install", "WantedBy", fallback="") == "timers.target", "the timer is not WantedBy=timers.target")
    c.ok(not tim.has_option("Timer", "Unit") or tim.get("Timer", "Unit") == os.path.basename(svc_path),
         "the timer's Unit= is not the service")
    sa = shutil.which("systemd-analyze")
    if not sa:
        c.skipped.append("systemd-analyze")
        return
    with tempfile.TemporaryDirectory() as d:
        # ExecStart must exist for verify: point it at the script here. No
        # Documentation=: the man page is there only once installed.
        for src in (svc_path, tim_path):
            with open(src) as f:
                text = f.read()
            text = text.replace("/usr/local/bin/tiermalloc-textfile.sh", SCRIPT)
            text = "\n".join(l for l in text.split("\n") if not l.startswith("Documentation="))
            with open(os.path.join(d, os.path.basename(src)), "w") as f:
                f.write(text)
        r = subprocess.run([sa, "verify", os.path.join(d, os.path.basename(svc_path)),
                            os.path.join(d, os.path.basename(tim_path))],
                           capture_output=True, text=True, env=dict(os.environ, SYSTEMD_LOG_LEVEL="notice"))
        out = [l for l in (r.stdout + r.stderr).splitlines() if l.strip()]
        c.ok(r.returncode == 0 and not out, "systemd-analyze verify: %s" % " | ".join(out))


# ---- the textfile script ----------------------------------------------------------

def run_script(args, env_extra, timeout=30):
    env = dict(os.environ)
    env.pop("TIERMALLOC_TEXTFILE_DIR", None)
    env.update(env_extra)
    return subprocess.run(["sh", SCRIPT] + args, capture_output=True, text=True, env=env, timeout=timeout)


def fake_tierctl(d, body):
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "tierctl")
    with open(path, "w") as f:
        f.write("#!/bin/sh\n" + body + "\n")
    os.chmod(path, 0o755)
    return path


def check_script(c, sample):
    r = subprocess.run(["sh", "-n", SCRIPT], capture_output=True, text=True)
    c.ok(r.returncode == 0, "sh -n %s: %s" % (os.path.relpath(SCRIPT, ROOT), r.stderr.strip()))
    for shell in ("dash", "busybox"):
        exe = shutil.which(shell)
        if exe:
            cmd = [exe, "sh", "-n", SCRIPT] if shell == "busybox" else [exe, "-n", SCRIPT]
            r = subprocess.run(cmd, capture_output=True, text=True)
            c.ok(r.returncode == 0, "%s -n: %s" % (shell, r.stderr.strip()))
    c.ok(os.access(SCRIPT, os.X_OK), "%s is not executable" % os.path.relpath(SCRIPT, ROOT))
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out")
        os.mkdir(out)
        prom = os.path.join(out, "tiermalloc.prom")
        sample_path = os.path.join(tmp, "sample.prom")
        with open(sample_path, "w") as f:
            f.write(sample)
        good = fake_tierctl(os.path.join(tmp, "good"), 'test "$1 $2" = "status --prom" || exit 2\ncat %s' % sample_path)

        # The argument, through TIERCTL.
        r = run_script([out], {"TIERCTL": good})
        c.ok(r.returncode == 0 and r.stderr == "", "the script with a working tierctl: exit %d, %r"
             % (r.returncode, r.stderr))
        text, err = read_text(prom) if os.path.exists(prom) else (None, "not written")
        c.ok(text == sample, "the script's file is not tierctl's output (%s)" % (err or "differs"))
        if text:
            check_prom_text(c, text, "the file the textfile script wrote")
        c.ok(os.path.exists(prom) and (os.stat(prom).st_mode & 0o777) == 0o644,
             "the script's file is not mode 0644 (the node exporter may run as another user)")
        c.ok(os.listdir(out) == ["tiermalloc.prom"], "the script left files behind: %s" % os.listdir(out))

        # tierctl from PATH; the directory from TIERMALLOC_TEXTFILE_DIR.
        os.unlink(prom)
        r = run_script([], {"PATH": os.path.dirname(good) + os.pathsep + os.environ.get("PATH", ""), "TIERMALLOC_TEXTFILE_DIR": out})
        c.ok(r.returncode == 0 and os.path.exists(prom), "the script with tierctl from PATH and "
             "TIERMALLOC_TEXTFILE_DIR: exit %d, %r" % (r.returncode, r.stderr))

        # Failures: exit 1, one line, the previous file left as it was.
        with open(prom, "w") as f:
            f.write("# previous\n")
        failing = [
            ("a tierctl that fails", [out], {"TIERCTL": fake_tierctl(os.path.join(tmp, "f"), "echo 'tierctl: cannot read /dev/shm: boom' >&2\nexit 1")},
             "cannot read /dev/shm"),
            ("no tierctl", [out], {"TIERCTL": os.path.join(tmp, "no-such-tierctl")}, "failed (exit 127)"),
            ("a missing directory", [os.path.join(tmp, "nodir")], {"TIERCTL": good}, "is not a directory"),
        ]
        trunc_dir = os.path.join(tmp, "t")
        failing.append(("a truncated output", [out],
                        {"TIERCTL": fake_tierctl(trunc_dir, "printf '# TYPE x gauge\\nx 1'")}, "truncated"))
        empty_dir = os.path.join(tmp, "e")
        failing.append(("an empty output", [out], {"TIERCTL": fake_tierctl(empty_dir, "exit 0")}, "truncated"))
        for what, args, env, expect in failing:
            r = run_script(args, env)
            lines = r.stderr.splitlines()
            c.ok(r.returncode == 1 and len(lines) == 1 and expect in lines[0] and r.stdout == "",
                 "the script with %s: exit %d, stderr %r (one line with %r expected)"
                 % (what, r.returncode, r.stderr, expect))
            with open(prom) as f:
                c.ok(f.read() == "# previous\n", "the script with %s changed tiermalloc.prom" % what)
            c.ok(sorted(os.listdir(out)) == ["tiermalloc.prom"], "the script with %s left files: %s"
                 % (what, os.listdir(out)))
        # A writable directory it cannot create in (not as root: root can).
        if os.geteuid() != 0:
            ro = os.path.join(tmp, "ro")
            os.mkdir(ro, 0o555)
            r = run_script([ro], {"TIERCTL": good})
            c.ok(r.returncode == 1 and len(r.stderr.splitlines()) == 1, "the script with a read-only directory: "
                 "exit %d, %r" % (r.returncode, r.stderr))

        node_exporter_reads(c, good, sample)


def node_exporter_reads(c, tierctl, sample):
    """The node exporter's textfile collector takes the file the script writes."""
    exe = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
    if not exe:
        c.skipped.append("node exporter")
        return
    _, fams = parse_prom(sample)
    want = sum(len(f.samples) for f in fams.values())
    d = tempfile.mkdtemp()
    try:
        os.chmod(d, 0o755)
        r = run_script([d], {"TIERCTL": tierctl})
        if not c.ok(r.returncode == 0, "the script for the node exporter: %r" % r.stderr):
            return
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        cmd = [exe, "--collector.disable-defaults", "--collector.textfile",
               "--collector.textfile.directory=" + d, "--web.listen-address=127.0.0.1:%d" % port]
        # As root, run it as nobody, as Debian's runs as prometheus: the file must be readable.
        setpriv = shutil.which("setpriv")
        if os.geteuid() == 0 and setpriv:
            cmd = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "--"] + cmd
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        body = None
        try:
            for _ in range(100):
                try:
                    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=2) as resp:
                        body = resp.read().decode()
                    break
                except OSError:
                    if proc.poll() is not None:
                        break
                    time.sleep(0.1)
        finally:
            proc.terminate()
            try:
                _, err = proc.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                _, err = proc.communicate()
        if not c.ok(body is not None, "the node exporter did not answer: %s" % (err or "").strip()[-300:]):
            return
        got = [l for l in body.splitlines() if l.startswith("tiermalloc_")]
        c.ok("node_textfile_scrape_error 0" in body, "the node exporter reports a textfile error: %s"
             % [l for l in body.splitlines() if "textfile" in l and not l.startswith("#")][:4])
        c.ok(len(got) == want, "the node exporter serves %d tiermalloc samples, the file has %d" % (len(got), want))
        c.ok(re.search(r'node_textfile_mtime_seconds\{file="(.*/)?tiermalloc\.prom"\}', body),
             "node_textfile_mtime_seconds has no file label alerts.yml's TiermallocTextfileStale matches")
    finally:
        shutil.rmtree(d, ignore_errors=True)


# ---- a live run ------------------------------------------------------------------------

HOLD = "import sys, time; x = bytearray(24 << 20); x[::4096] = b'x' * len(x[::4096]); print('up', flush=True); time.sleep(60)"


def start_held(live_dir, argv0=None, budgets=None):
    """A python3 under the library; returns the process once its record exists."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERMALLOC_")}
    env.update(LD_PRELOAD=LIB, TIERMALLOC_LIVE_DIR=live_dir)
    env.update(budgets if budgets is not None else
               {"TIERMALLOC_TOPTIER_HIGH": "256M", "TIERMALLOC_TOPTIER_MAX": "512M"})
    exe = argv0 or sys.executable
    p = subprocess.Popen([exe, "-c", HOLD], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    p.stdout.readline()
    rec = os.path.join(live_dir, "tiermalloc.%d" % p.pid)
    for _ in range(100):
        if os.path.exists(rec):
            break
        time.sleep(0.05)
    time.sleep(0.5)   # the reclaim thread publishes a measurement
    return p


def stop(procs):
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()


def tierctl_prom(live_dir):
    return subprocess.run([TIERCTL, "status", "--prom"], capture_output=True, text=True,
                          env=dict(os.environ, TIERMALLOC_LIVE_DIR=live_dir), timeout=30)


def check_live(c):
    if not c.ok(os.access(TIERCTL, os.X_OK) and os.path.exists(LIB),
                "%s or %s missing: make all" % (TIERCTL, LIB)):
        return
    with tempfile.TemporaryDirectory() as live:
        r = tierctl_prom(live)
        c.ok(r.returncode == 0, "tierctl status --prom with no process: exit %d, %r" % (r.returncode, r.stderr))
        errs, fams = parse_prom(r.stdout)
        c.errors(errs, "tierctl status --prom with no process")
        c.ok(fams and all(not f.samples and f.type for f in fams.values()),
             "tierctl status --prom with no process: HELP and TYPE only")
        p = start_held(live)
        try:
            r = tierctl_prom(live)
            c.ok(r.returncode == 0 and r.stderr == "", "tierctl status --prom: exit %d, %r"
                 % (r.returncode, r.stderr))
            fams = check_prom_text(c, r.stdout, "live tierctl status --prom", pids=[str(p.pid)])
            b = {s[1]["limit"]: (s[2], s[1]["source"]) for s in
                 getattr(fams.get("tiermalloc_tier_budget_bytes"), "samples", []) if s[1]["tier"] == "0"}
            c.ok(b.get("high") == (str(256 << 20), "env") and b.get("max") == (str(512 << 20), "env"),
                 "live: tier 0's budgets from TIERMALLOC_TOPTIER_HIGH/MAX: %s" % b)
            # The script against the real tierctl, through PATH.
            with tempfile.TemporaryDirectory() as out:
                r = run_script([out], {"PATH": os.path.dirname(TIERCTL) + os.pathsep + os.environ.get("PATH", ""),
                                       "TIERMALLOC_LIVE_DIR": live})
                c.ok(r.returncode == 0, "the textfile script with build/tierctl: exit %d, %r"
                     % (r.returncode, r.stderr))
                prom = os.path.join(out, "tiermalloc.prom")
                if os.path.exists(prom):
                    text, err = read_text(prom)
                    if c.ok(text is not None, "live textfile: %s" % err):
                        check_prom_text(c, text, "the textfile script's file from build/tierctl", pids=[str(p.pid)])
        finally:
            stop([p])


def write_sample():
    """Two processes under the library (one with a quote and a backslash in
    its name, for the escapes): tierctl status --prom into sample.prom."""
    with tempfile.TemporaryDirectory() as tmp:
        live = os.path.join(tmp, "live")
        os.mkdir(live)
        odd = os.path.join(tmp, 'py"x\\y')
        os.symlink(sys.executable, odd)
        procs = []
        try:
            procs.append(start_held(live))
            procs.append(start_held(live, argv0=odd, budgets={"TIERMALLOC_TOPTIER_MAX": "50%"}))
            time.sleep(1)
            r = tierctl_prom(live)
        finally:
            stop(procs)
    if r.returncode != 0:
        print("docs: tierctl status --prom: %s" % r.stderr.strip())
        return 1
    errs, fams = parse_prom(r.stdout)
    probs = errs or tiermalloc_problems(fams, [str(p.pid) for p in procs])
    for e in probs:
        print("docs: the new sample: %s" % e)
    if probs:
        return 1
    # The machine's own cgroup path is of no interest to a reader.
    text = re.sub(r'(tiermalloc_info\{[^\n]*?,cgroup=")(?:[^"\\]|\\.)*"', r'\1/sample.slice/app.service"', r.stdout)
    with open(SAMPLE, "w") as f:
        f.write(text)
    print("docs: wrote %s (%d lines)" % (os.path.relpath(SAMPLE, ROOT), text.count("\n")))
    return 0


def check_markdown(c):
    """Files the docs name are there."""
    for md in ("kubernetes.md", "prometheus.md"):
        path = os.path.join(DOCS, md)
        if not c.ok(os.path.exists(path), "docs/%s is missing" % md):
            continue
        with open(path) as f:
            text = f.read()
        for ref in sorted(set(re.findall(r"\]\(([^)#\s]+)\)", text))):
            if "://" in ref:
                continue
            c.ok(os.path.exists(os.path.normpath(os.path.join(DOCS, ref))), "docs/%s links to %s, which is not there"
                 % (md, ref))
        for ref in sorted(set(re.findall(r"\b((?:docs|tests)/[\w./-]+\.(?:yaml|yml|sh|service|timer|prom|py|md))", text))):
            c.ok(os.path.exists(os.path.join(ROOT, ref)), "docs/%s names %s, which is not there" % (md, ref))


def main(argv):
    if argv[1:2] == ["--prom"] and len(argv) == 3:
        text, err = read_text(argv[2])
        if text is None:
            print("%s: %s" % (argv[2], err))
            return 1
        errs, fams = parse_prom(text)
        probs = errs or (tiermalloc_problems(fams) if any(n.startswith("tiermalloc_") for n in fams) else [])
        for e in probs:
            print("%s: %s" % (argv[2], e))
        if not probs:
            print("%s: valid, %d families, %d samples" % (argv[2], len(fams), sum(len(f.samples) for f in fams.values())))
        return 1 if probs else 0
    if argv[1:] == ["--write-sample"]:
        return write_sample()
    if argv[1:] not in ([], ["--live"]):
        print(__doc__.strip())
        return 2
    yaml = import_yaml()
    c = Checks()
    sample, err = read_text(SAMPLE) if os.path.exists(SAMPLE) else (None, "missing: --write-sample makes it")
    if c.ok(sample is not None, "%s: %s" % (os.path.relpath(SAMPLE, ROOT), err)):
        fams = check_prom_text(c, sample, os.path.relpath(SAMPLE, ROOT))
        c.ok(len(fams.get("tiermalloc_info", Family("")).samples) >= 2,
             "sample.prom has fewer than two processes")
        check_validator(c, sample)
    else:
        sample, fams = "", {}
    loaded = check_yaml(c, yaml)
    check_manifests(c, loaded)
    alerts = check_rules(c, loaded, fams) or {}
    promtool_test(c, yaml, alerts)
    check_units(c)
    if sample:
        check_script(c, sample)
    check_markdown(c)
    if "--live" in argv:
        check_live(c)
    skipped = " (not found, so not run: %s)" % ", ".join(c.skipped) if c.skipped else ""
    if c.failed:
        print("docs: %d of %d checks failed%s" % (c.failed, c.n, skipped))
        return 1
    print("docs: ok, %d checks%s" % (c.n, skipped))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
