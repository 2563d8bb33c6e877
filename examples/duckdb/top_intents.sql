-- The top intents (code paths) of an ioblame fleet dataset, by bytes across all hosts: the
-- same table as `ioblame fleet DIR --json` (its "top_intents", without the per-host bytes).
--
--   duckdb -c "SET VARIABLE dataset = '/path/to/dataset'" -c ".read top_intents.sql"
--
-- On object storage (docs/dataset.md):
--   INSTALL httpfs; LOAD httpfs;
--   CREATE SECRET (TYPE s3, PROVIDER credential_chain);
--   SET VARIABLE dataset = 's3://bucket/ioblame';
--
-- Narrow the partitions read (only those files are opened) with e.g.
--   AND date BETWEEN DATE '2026-11-01' AND DATE '2026-11-30' AND host LIKE 'db-%'
-- in both WHERE clauses.

WITH
-- Traces whose export completed (their `traces` row is written last).
traces AS (
    SELECT DISTINCT trace_id
    FROM read_parquet(getvariable('dataset') || '/traces/*/*/*.parquet', hive_partitioning = true)
),
-- Intent rows that were charged bytes.
charged AS (
    SELECT *
    FROM read_parquet(getvariable('dataset') || '/intents/*/*/*.parquet', hive_partitioning = true)
    WHERE read_bytes + readahead_bytes + write_bytes > 0
      AND trace_id IN (SELECT trace_id FROM traces)
)
SELECT
    intent_key,
    sum(read_bytes + readahead_bytes + write_bytes) AS bytes,
    sum(read_bytes) AS read_bytes,
    sum(readahead_bytes) AS readahead_bytes,
    sum(write_bytes) AS write_bytes,
    sum(read_ios + readahead_ios + write_ios) AS ios,
    count(DISTINCT host) AS n_hosts,
    count(DISTINCT trace_id) AS n_traces,
    list(DISTINCT host ORDER BY host) AS hosts,
    first(frames) AS frames
FROM charged
GROUP BY intent_key
ORDER BY bytes DESC, intent_key ASC
LIMIT 20;
