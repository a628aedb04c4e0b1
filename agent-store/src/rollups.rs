//! Migration 5: the dashboard's columns, indexes and daily rollups. Virtual columns
//! computed from the record's JSON (`tokens`, `partial`, `store_failures`), the covering
//! index of the dashboard's queries, and two daily rollup tables (`runs_daily` per
//! agent, day, variant, ending and latency bucket; `runs_daily_turns` per agent, day,
//! variant, ending and LLM calls) kept by triggers on `runs` in the transaction that
//! inserts, replaces or deletes a run. The queries that read them are `dashboard/`.
//! A released migration's text never changes (its checksum is stored).

/// Migration 5 on SQLite: virtual columns computed from the record's JSON (stored only
/// in the index), the indexes of the dashboard's queries, and the daily rollups with
/// their triggers (`{add NEW 1}` and `{add OLD -1}` are filled in by [`migration_5`]).
pub(crate) const MIGRATION_5_SQLITE: &str = "
ALTER TABLE runs ADD COLUMN tokens BIGINT GENERATED ALWAYS AS (
    CASE WHEN json_valid(record) THEN
        COALESCE(json_extract(record, '$.usage.input_tokens'), 0)
        + COALESCE(json_extract(record, '$.usage.output_tokens'), 0)
    END) VIRTUAL;
ALTER TABLE runs ADD COLUMN partial BIGINT GENERATED ALWAYS AS (
    CASE WHEN json_valid(record) THEN
        json_extract(record, '$.metadata.partial') = 'true'
    END) VIRTUAL;
ALTER TABLE runs ADD COLUMN store_failures BIGINT GENERATED ALWAYS AS (
    CASE WHEN json_valid(record) THEN
        CAST(COALESCE(json_extract(record, '$.metadata.store_failures'), 0) AS INTEGER)
    END) VIRTUAL;
CREATE INDEX IF NOT EXISTS runs_dash_agent ON runs (agent, started_at_ms, variant, ending,
    duration_ms, cost_usd, tokens, partial, store_failures, llm_calls, category);
CREATE INDEX IF NOT EXISTS runs_dash_ending ON runs (ending, started_at_ms);
CREATE INDEX IF NOT EXISTS runs_dash_thread ON runs (thread_id, started_at_ms);
CREATE INDEX IF NOT EXISTS runs_dash_category ON runs (category, started_at_ms);
CREATE TABLE IF NOT EXISTS runs_daily (
    agent TEXT NOT NULL,
    day BIGINT NOT NULL,
    variant_key TEXT NOT NULL,
    ending TEXT NOT NULL,
    runs BIGINT NOT NULL,
    partial BIGINT NOT NULL,
    store_failures BIGINT NOT NULL,
    tokens BIGINT NOT NULL,
    cost_usd DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (agent, day, variant_key, ending)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS runs_daily_latency (
    agent TEXT NOT NULL,
    day BIGINT NOT NULL,
    variant_key TEXT NOT NULL,
    latency_floor_ms BIGINT NOT NULL,
    runs BIGINT NOT NULL,
    PRIMARY KEY (agent, day, variant_key, latency_floor_ms)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS runs_daily_turns (
    agent TEXT NOT NULL,
    day BIGINT NOT NULL,
    variant_key TEXT NOT NULL,
    ending TEXT NOT NULL,
    llm_calls BIGINT NOT NULL,
    capped BIGINT NOT NULL,
    runs BIGINT NOT NULL,
    PRIMARY KEY (agent, day, variant_key, ending, llm_calls, capped)
) WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS runs_rollup_insert AFTER INSERT ON runs BEGIN
    {add NEW 1}
END;
CREATE TRIGGER IF NOT EXISTS runs_rollup_update AFTER UPDATE ON runs
WHEN OLD.agent IS NOT NEW.agent OR OLD.variant IS NOT NEW.variant
    OR OLD.ending IS NOT NEW.ending OR OLD.category IS NOT NEW.category
    OR OLD.started_at_ms IS NOT NEW.started_at_ms OR OLD.duration_ms IS NOT NEW.duration_ms
    OR OLD.llm_calls IS NOT NEW.llm_calls OR OLD.cost_usd IS NOT NEW.cost_usd
    OR OLD.record IS NOT NEW.record
BEGIN
    {add OLD -1}
    {add NEW 1}
END;
CREATE TRIGGER IF NOT EXISTS runs_rollup_delete AFTER DELETE ON runs BEGIN
    {add OLD -1}
END;
";

/// Migration 5 on PostgreSQL: stored generated columns through functions that never
/// fail: PostgreSQL's JSON cannot hold `\u0000`, so it is replaced (by `\ufffd`, in
/// string values only) before the cast, and any other failure gives NULL instead of
/// failing the insert. The same indexes and rollups as on SQLite; one trigger function.
pub(crate) const MIGRATION_5_POSTGRES: &str = "
CREATE OR REPLACE FUNCTION runs_json_bigint(record TEXT, path TEXT[]) RETURNS BIGINT
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF record IS NULL THEN RETURN NULL; END IF;
    RETURN (replace(record, '\\u0000', '\\ufffd')::json #>> path)::bigint;
EXCEPTION WHEN others THEN RETURN NULL;
END $$;
CREATE OR REPLACE FUNCTION runs_json_text(record TEXT, path TEXT[]) RETURNS TEXT
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF record IS NULL THEN RETURN NULL; END IF;
    RETURN replace(record, '\\u0000', '\\ufffd')::json #>> path;
EXCEPTION WHEN others THEN RETURN NULL;
END $$;
ALTER TABLE runs ADD COLUMN tokens BIGINT GENERATED ALWAYS AS (
    COALESCE(runs_json_bigint(record, '{usage,input_tokens}'), 0)
    + COALESCE(runs_json_bigint(record, '{usage,output_tokens}'), 0)) STORED;
ALTER TABLE runs ADD COLUMN partial BIGINT GENERATED ALWAYS AS (
    CASE WHEN runs_json_text(record, '{metadata,partial}') = 'true' THEN 1 ELSE 0 END) STORED;
ALTER TABLE runs ADD COLUMN store_failures BIGINT GENERATED ALWAYS AS (
    COALESCE(runs_json_bigint(record, '{metadata,store_failures}'), 0)) STORED;
CREATE INDEX IF NOT EXISTS runs_dash_agent ON runs (agent, started_at_ms, variant, ending,
    duration_ms, cost_usd, tokens, partial, store_failures, llm_calls, category);
CREATE INDEX IF NOT EXISTS runs_dash_ending ON runs (ending, started_at_ms);
CREATE INDEX IF NOT EXISTS runs_dash_thread ON runs (thread_id, started_at_ms);
CREATE INDEX IF NOT EXISTS runs_dash_category ON runs (category, started_at_ms);
CREATE TABLE IF NOT EXISTS runs_daily (
    agent TEXT NOT NULL,
    day BIGINT NOT NULL,
    variant_key TEXT NOT NULL,
    ending TEXT NOT NULL,
    runs BIGINT NOT NULL,
    partial BIGINT NOT NULL,
    store_failures BIGINT NOT NULL,
    tokens BIGINT NOT NULL,
    cost_usd DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (agent, day, variant_key, ending)
);
CREATE TABLE IF NOT EXISTS runs_daily_latency (
    agent TEXT NOT NULL,
    day BIGINT NOT NULL,
    variant_key TEXT NOT NULL,
    latency_floor_ms BIGINT NOT NULL,
    runs BIGINT NOT NULL,
    PRIMARY KEY (agent, day, variant_key, latency_floor_ms)
);
CREATE TABLE IF NOT EXISTS runs_daily_turns (
    agent TEXT NOT NULL,
    day BIGINT NOT NULL,
    variant_key TEXT NOT NULL,
    ending TEXT NOT NULL,
    llm_calls BIGINT NOT NULL,
    capped BIGINT NOT NULL,
    runs BIGINT NOT NULL,
    PRIMARY KEY (agent, day, variant_key, ending, llm_calls, capped)
);
CREATE OR REPLACE FUNCTION runs_rollup() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND (OLD.agent, OLD.variant, OLD.ending, OLD.category,
        OLD.started_at_ms, OLD.duration_ms, OLD.llm_calls, OLD.cost_usd, OLD.tokens,
        OLD.partial, OLD.store_failures) IS NOT DISTINCT FROM (NEW.agent, NEW.variant,
        NEW.ending, NEW.category, NEW.started_at_ms, NEW.duration_ms, NEW.llm_calls,
        NEW.cost_usd, NEW.tokens, NEW.partial, NEW.store_failures) THEN
        RETURN NULL;
    END IF;
    IF TG_OP <> 'INSERT' THEN
        {add OLD -1}
    END IF;
    IF TG_OP <> 'DELETE' THEN
        {add NEW 1}
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER runs_rollup AFTER INSERT OR UPDATE OR DELETE ON runs
    FOR EACH ROW EXECUTE FUNCTION runs_rollup();
";

/// The statements that add one run (`{row}` = `NEW`, `{sign}` = `1`) to the rollups
/// or take it away (`OLD`, `-1`), in the triggers of both backends.
const ROLLUP_ADD: &str =
    "INSERT INTO runs_daily VALUES ({row}.agent, {row}.started_at_ms / 86400000,
        {variant_key}, {row}.ending, {sign}, {sign} * COALESCE({row}.partial, 0),
        {sign} * COALESCE({row}.store_failures, 0), {sign} * COALESCE({row}.tokens, 0),
        {sign} * COALESCE({row}.cost_usd, 0))
    ON CONFLICT (agent, day, variant_key, ending) DO UPDATE SET
        runs = runs_daily.runs + excluded.runs,
        partial = runs_daily.partial + excluded.partial,
        store_failures = runs_daily.store_failures + excluded.store_failures,
        tokens = runs_daily.tokens + excluded.tokens,
        cost_usd = runs_daily.cost_usd + excluded.cost_usd;
    INSERT INTO runs_daily_latency VALUES ({row}.agent, {row}.started_at_ms / 86400000,
        {variant_key}, {bucket}, {sign})
    ON CONFLICT (agent, day, variant_key, latency_floor_ms) DO UPDATE SET
        runs = runs_daily_latency.runs + excluded.runs;
    INSERT INTO runs_daily_turns VALUES ({row}.agent, {row}.started_at_ms / 86400000,
        {variant_key}, {row}.ending, {row}.llm_calls,
        CASE WHEN {row}.category = 'max_llm_calls' THEN 1 ELSE 0 END, {sign})
    ON CONFLICT (agent, day, variant_key, ending, llm_calls, capped) DO UPDATE SET
        runs = runs_daily_turns.runs + excluded.runs;";

/// Migration 5 for `backend`: the templates above with the rollup statements filled in.
pub(crate) fn migration_5(postgres: bool) -> String {
    let template = if postgres {
        MIGRATION_5_POSTGRES
    } else {
        MIGRATION_5_SQLITE
    };
    let add = |row: &str, sign: &str| {
        ROLLUP_ADD
            .replace(
                "{variant_key}",
                "CASE WHEN {row}.variant IS NULL THEN '' ELSE '=' || {row}.variant END",
            )
            .replace(
                "{bucket}",
                &LATENCY_BUCKET.replace("duration_ms", &format!("{row}.duration_ms")),
            )
            .replace("{row}", row)
            .replace("{sign}", sign)
    };
    template
        .replace("{add NEW 1}", &add("NEW", "1"))
        .replace("{add OLD -1}", &add("OLD", "-1"))
}

/// The latency bucket of `duration_ms` in SQL (integer division on both backends).
pub(crate) const LATENCY_BUCKET: &str = "CASE WHEN duration_ms < 100 THEN duration_ms \
     WHEN duration_ms < 1000 THEN duration_ms / 10 * 10 \
     WHEN duration_ms < 10000 THEN duration_ms / 100 * 100 \
     WHEN duration_ms < 100000 THEN duration_ms / 1000 * 1000 \
     WHEN duration_ms < 1000000 THEN duration_ms / 10000 * 10000 \
     WHEN duration_ms < 10000000 THEN duration_ms / 100000 * 100000 \
     ELSE duration_ms / 1000000 * 1000000 END";
