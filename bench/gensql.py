"""bench/gensql.py: writes the SQL script of bench/run's sqlite3 workload.

    python3 bench/gensql.py [rows] > script.sql
    sqlite3 :memory: < script.sql

A table of `rows` rows (default 200000) inserted one statement at a time in
one transaction, three indexes, then GROUP BY / ORDER BY / JOIN queries, an
UPDATE, a DELETE and a CREATE TABLE AS. The content is pseudo-random but
fixed, so every allocator must print the same result.
"""
import sys

CITIES = ["Lyon", "Oslo", "Lima", "Pune", "Kobe", "Graz", "Bari", "Cork",
          "Kiel", "Nice", "Riga", "Turku", "Porto", "Delft", "Split", "Gent"]
SYLL = ["ka", "ri", "mo", "te", "su", "na", "lo", "vi", "de", "zu", "pa", "en"]


def rows(n):
    x = 987654321
    for i in range(1, n + 1):
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        a = x >> 8
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        b = x >> 8
        name = "".join(SYLL[(a >> s) % len(SYLL)] for s in (3, 7, 11, 15)) + str(a % 97)
        grp = b % 500
        city = CITIES[(a >> 20) % len(CITIES)]
        val = (b % 100000) / 100.0
        note = "n%d-%s" % (b % 1000, name[: 1 + a % 8]) * (1 + b % 4)
        yield "INSERT INTO t VALUES(%d,'%s',%d,'%s',%.2f,'%s');" % (i, name, grp, city, val, note)


def script(n):
    out = [
        "CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, grp INTEGER, city TEXT, val REAL, note TEXT);",
        "BEGIN;",
    ]
    out.extend(rows(n))
    out += [
        "COMMIT;",
        "CREATE INDEX t_grp ON t(grp);",
        "CREATE INDEX t_name ON t(name);",
        "CREATE INDEX t_city_val ON t(city, val);",
        "SELECT grp, count(*), round(sum(val), 2), min(name), max(name) FROM t GROUP BY grp ORDER BY grp LIMIT 25;",
        "SELECT city, count(*), round(avg(val), 3), max(length(note)) FROM t GROUP BY city ORDER BY 2 DESC, 1;",
        "SELECT id, name, val FROM t ORDER BY val DESC, id LIMIT 15;",
        "SELECT substr(name, 1, 2) AS p, count(*), round(sum(val), 2) FROM t GROUP BY p ORDER BY 2 DESC, 1 LIMIT 20;",
        "SELECT count(*) FROM t WHERE name LIKE 'ka%' OR note LIKE '%zu%';",
        "UPDATE t SET val = val * 1.5, note = upper(note) WHERE grp % 7 = 0;",
        "DELETE FROM t WHERE grp % 11 = 0;",
        "SELECT a.grp, count(*) FROM t a JOIN (SELECT grp, max(val) AS m FROM t WHERE grp < 100 GROUP BY grp) b"
        " ON a.grp = b.grp AND a.val > b.m * 0.9 GROUP BY a.grp ORDER BY 2 DESC, 1 LIMIT 10;",
        "CREATE TABLE u AS SELECT city, grp, round(sum(val), 2) AS s, count(*) AS c FROM t GROUP BY city, grp;",
        "SELECT count(*), sum(c), round(sum(s), 2) FROM u;",
        "SELECT city, grp, s FROM u ORDER BY s DESC, city, grp LIMIT 10;",
        "SELECT length(group_concat(name, ',')) FROM (SELECT name FROM t ORDER BY name, id LIMIT 50000);",
        "SELECT count(DISTINCT name) FROM t WHERE grp < 250;",
    ]
    return "\n".join(out) + "\n"


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200000
    sys.stdout.write(script(n))


if __name__ == "__main__":
    main()
