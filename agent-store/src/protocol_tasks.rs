//! Tasks of the agent protocols a store backs (migration 9): an A2A task served by
//! `agent-interop` is one row, its protocol's JSON kept whole, so that the task outlives
//! the process that took it and another process (a restarted server, a worker) can
//! answer for it. The run the task started keeps its own checkpoint (`checkpoints`).

use agent_core::store::StoreError;
use sqlx::Row;

use crate::columns::{check_key, column, db_ms};
use crate::db::{on_read_pool, write_tx};
use crate::errors::db_error;
use crate::store::Store;

/// One stored protocol task.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProtocolTask {
    /// The protocol (`a2a`).
    pub protocol: String,
    /// The task's id (unique per protocol).
    pub id: String,
    /// The conversation (A2A's `contextId`).
    pub context_id: String,
    /// The agent that serves it.
    pub agent: String,
    /// The run it started (the checkpoint's run id).
    pub run_id: String,
    /// Its state as the protocol names it (`TASK_STATE_COMPLETED`, ...).
    pub state: String,
    /// The task as the protocol's JSON.
    pub body: String,
    /// When it was last written (ms since the Unix epoch).
    pub updated_at_ms: u64,
}

impl ProtocolTask {
    /// A task row from its parts (`updated_at_ms` is set when it is written).
    pub fn new(
        protocol: impl Into<String>,
        id: impl Into<String>,
        context_id: impl Into<String>,
        agent: impl Into<String>,
        run_id: impl Into<String>,
        state: impl Into<String>,
        body: impl Into<String>,
    ) -> Self {
        Self {
            protocol: protocol.into(),
            id: id.into(),
            context_id: context_id.into(),
            agent: agent.into(),
            run_id: run_id.into(),
            state: state.into(),
            body: body.into(),
            updated_at_ms: 0,
        }
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl Store {
    /// Writes `task` (insert, or replace the row of the same protocol and id), one
    /// transaction.
    ///
    /// # Errors
    /// [`StoreError::Invalid`] for an empty protocol or id or one with a NUL byte;
    /// [`StoreError::Unavailable`] / [`StoreError::Backend`] from the database.
    pub async fn put_protocol_task(&self, task: &ProtocolTask) -> Result<(), StoreError> {
        check_key("protocol", &task.protocol)?;
        check_key("task id", &task.id)?;
        self.shared.ready().await?;
        let now = db_ms(now_ms());
        write_tx!(&self.shared, DB, tx => {
            sqlx::query(
                "INSERT INTO protocol_tasks (protocol, task_id, context_id, agent, run_id, \
                 state, body, updated_at_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
                 ON CONFLICT (protocol, task_id) DO UPDATE SET context_id = excluded.context_id, \
                 agent = excluded.agent, run_id = excluded.run_id, state = excluded.state, \
                 body = excluded.body, updated_at_ms = excluded.updated_at_ms",
            )
            .bind(&task.protocol)
            .bind(&task.id)
            .bind(column(&task.context_id))
            .bind(column(&task.agent))
            .bind(column(&task.run_id))
            .bind(column(&task.state))
            .bind(column(&task.body))
            .bind(now)
            .execute(&mut *tx)
            .await
            .map_err(db_error)?;
        })
    }

    /// The task `id` of `protocol`, or `None`.
    ///
    /// # Errors
    /// As [`put_protocol_task`](Self::put_protocol_task).
    pub async fn protocol_task(
        &self,
        protocol: &str,
        id: &str,
    ) -> Result<Option<ProtocolTask>, StoreError> {
        check_key("protocol", protocol)?;
        check_key("task id", id)?;
        self.shared.ready().await?;
        let row = on_read_pool!(&self.shared.pools, pool, DB => {
            sqlx::query(
                "SELECT context_id, agent, run_id, state, body, updated_at_ms FROM protocol_tasks \
                 WHERE protocol = $1 AND task_id = $2",
            )
            .bind(protocol)
            .bind(id)
            .fetch_optional(pool)
            .await
            .map_err(db_error)?
            .map(|row| {
                Ok::<_, sqlx::Error>(ProtocolTask {
                    protocol: protocol.to_owned(),
                    id: id.to_owned(),
                    context_id: row.try_get(0)?,
                    agent: row.try_get(1)?,
                    run_id: row.try_get(2)?,
                    state: row.try_get(3)?,
                    body: row.try_get(4)?,
                    updated_at_ms: u64::try_from(row.try_get::<i64, _>(5)?).unwrap_or(0),
                })
            })
            .transpose()
            .map_err(db_error)?
        });
        Ok(row)
    }

    /// The tasks of `protocol` served by `agent` whose state is `state`, oldest write
    /// first, at most `limit`: what a restarted server sweeps (tasks left `working`).
    ///
    /// # Errors
    /// As [`put_protocol_task`](Self::put_protocol_task).
    pub async fn protocol_tasks_in_state(
        &self,
        protocol: &str,
        agent: &str,
        state: &str,
        limit: usize,
    ) -> Result<Vec<ProtocolTask>, StoreError> {
        check_key("protocol", protocol)?;
        self.shared.ready().await?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = on_read_pool!(&self.shared.pools, pool, DB => {
            sqlx::query(
                "SELECT task_id, context_id, run_id, body, updated_at_ms FROM protocol_tasks \
                 WHERE protocol = $1 AND agent = $2 AND state = $3 \
                 ORDER BY updated_at_ms, task_id LIMIT $4",
            )
            .bind(protocol)
            .bind(column(agent))
            .bind(column(state))
            .bind(limit)
            .fetch_all(pool)
            .await
            .map_err(db_error)?
            .into_iter()
            .map(|row| {
                Ok::<_, sqlx::Error>(ProtocolTask {
                    protocol: protocol.to_owned(),
                    id: row.try_get(0)?,
                    context_id: row.try_get(1)?,
                    agent: agent.to_owned(),
                    run_id: row.try_get(2)?,
                    state: state.to_owned(),
                    body: row.try_get(3)?,
                    updated_at_ms: u64::try_from(row.try_get::<i64, _>(4)?).unwrap_or(0),
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(db_error)?
        });
        Ok(rows)
    }
}
