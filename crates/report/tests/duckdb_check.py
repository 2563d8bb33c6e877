"""Reads a report's Parquet tables with DuckDB and prints facts as JSON.

Usage: python3 duckdb_check.py OUTDIR. Run by tests/report.rs, which compares the facts with
the fixture it wrote.
"""
import json
import sys

import duckdb

d = sys.argv[1]
con = duckdb.connect()
q = lambda sql: con.execute(sql.replace("@", d)).fetchall()
facts = {}
for t in ["ios", "acts", "intents", "roles", "files", "histograms"]:
    facts[t + "_rows"] = q(f"select count(*) from '@/{t}.parquet'")[0][0]
# Bytes per act from the IOs must equal acts.parquet's totals, per direction.
facts["act_mismatches"] = q(
    """
    with i as (
      select act,
        sum(case when dir = 'R' then size else 0 end) r,
        sum(case when dir = 'A' then size else 0 end) a,
        sum(case when dir = 'W' then size else 0 end) w,
        count(*) n, sum(io_us) io
      from '@/ios.parquet' group by act)
    select count(*) from '@/acts.parquet' a left join i on a.act = i.act
    where coalesce(i.r, 0) != a.read_bytes or coalesce(i.a, 0) != a.readahead_bytes
       or coalesce(i.w, 0) != a.write_bytes
       or coalesce(i.n, 0) != a.read_ios + a.readahead_ios + a.write_ios
       or coalesce(i.io, 0) != a.io_us
    """
)[0][0]
facts["total_bytes"] = int(q("select sum(size) from '@/ios.parquet'")[0][0] or 0)
facts["roles_bytes"] = int(
    q("select sum(read_bytes + readahead_bytes + write_bytes) from '@/roles.parquet'")[0][0] or 0
)
facts["files_bytes"] = int(
    q("select sum(read_bytes + readahead_bytes + write_bytes) from '@/files.parquet'")[0][0] or 0
)
facts["histogram_count"] = int(q("select sum(count) from '@/histograms.parquet'")[0][0] or 0)
facts["histogram_act0"] = [
    list(r)
    for r in q(
        "select counter, slot, lower, upper, count from '@/histograms.parquet' "
        "where act = 0 and counter = 2 order by slot"
    )
]
facts["intent_frames"] = q(
    "select frames from '@/intents.parquet' where intent = 2"
)[0][0]
facts["paths"] = sorted(
    r[0] for r in q("select path from '@/files.parquet' where path is not null")
)
facts["comm_escaped_raw"] = q(
    "select comm from '@/roles.parquet' where pid = 200"
)[0][0]
facts["row_groups"] = q(
    "select count(distinct row_group_id) from parquet_metadata('@/ios.parquet')"
)[0][0]
facts["compression"] = sorted(
    set(r[0] for r in q("select compression from parquet_metadata('@/ios.parquet')"))
)
print(json.dumps(facts))
