#!/usr/bin/env python3
"""The top intents (code paths) of an ioblame fleet dataset, by bytes across all hosts, on
Spark: the same table as `ioblame fleet DIR --json` ("top_intents", without the per-host
bytes) and as examples/duckdb/top_intents.sql.

    spark-submit top_intents.py /path/to/dataset            # or: python3 top_intents.py ...
    spark-submit --packages org.apache.hadoop:hadoop-aws:3.4.1 top_intents.py s3a://bucket/ioblame

Prints one JSON object per line (one per intent, most bytes first). With --check, also
prints the schema Spark read of each table.
"""

import argparse
import json

from pyspark.sql import SparkSession
from pyspark.sql import functions as F


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset", help="the dataset's root (a path or an s3a:// URL)")
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--master", default=None, help="Spark master, e.g. local[2]")
    ap.add_argument("--since", help="first date read, YYYY-MM-DD")
    ap.add_argument("--until", help="last date read, YYYY-MM-DD")
    ap.add_argument("--check", action="store_true", help="also print the schema of each table")
    args = ap.parse_args()

    b = SparkSession.builder.appName("ioblame-top-intents")
    if args.master:
        b = b.master(args.master)
    spark = (
        b.config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    ds = args.dataset.rstrip("/")

    def table(name):
        # Hive partitioning: host=... and date=... become columns; files whose names start
        # with "." or "_" (an export's temporary files) are skipped by Spark.
        df = spark.read.parquet(f"{ds}/{name}")
        if args.since:
            df = df.where(F.col("date") >= F.lit(args.since).cast("date"))
        if args.until:
            df = df.where(F.col("date") <= F.lit(args.until).cast("date"))
        return df

    traces = table("traces").select("trace_id").distinct()
    intents = table("intents")
    bytes_ = F.col("read_bytes") + F.col("readahead_bytes") + F.col("write_bytes")
    charged = intents.where(bytes_ > 0).join(traces, "trace_id", "left_semi")
    top = (
        charged.groupBy("intent_key")
        .agg(
            F.sum(bytes_).alias("bytes"),
            F.sum("read_bytes").alias("read_bytes"),
            F.sum("readahead_bytes").alias("readahead_bytes"),
            F.sum("write_bytes").alias("write_bytes"),
            F.sum(F.col("read_ios") + F.col("readahead_ios") + F.col("write_ios")).alias("ios"),
            F.countDistinct("host").alias("n_hosts"),
            F.countDistinct("trace_id").alias("n_traces"),
            F.array_sort(F.collect_set("host")).alias("hosts"),
            F.first("frames").alias("frames"),
        )
        .orderBy(F.col("bytes").desc(), F.col("intent_key").asc())
        .limit(args.top)
    )
    for r in top.collect():
        print(json.dumps({"top_intent": r.asDict()}))

    if args.check:
        for name in ["traces", "ios", "acts", "intents", "roles", "files", "histograms"]:
            fields = {f.name: f.dataType.simpleString() for f in table(name).schema.fields}
            print(json.dumps({"schema": name, "fields": fields}))
    spark.stop()


if __name__ == "__main__":
    main()
