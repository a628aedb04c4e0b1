//! [`Documents`]: a collection of documents with embeddings, searched by cosine
//! similarity; a [`Retriever`] for configs.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use agent_core::store::{Retrieved, Retriever, StoreFuture, normalize};
use agent_core::{
    Value,
    store::{Embedder, StoreError},
};
use serde::{Deserialize, Serialize};
use sqlx::{QueryBuilder, Row};
use tokio::sync::RwLock;

use crate::columns::{check_key, db_ms};
use crate::db::{Pools, on_read_pool, write_tx};
use crate::errors::db_error;
use crate::store::Store;
use crate::writer::chunks;

/// The documents of one collection in a [`Store`], embedded with one [`Embedder`], and
/// a [`Retriever`] over them: `config.retriever(store.documents("faq", embedder))`.
///
/// Search is brute force: the collection's vectors (of the embedder's model; vectors of
/// other models are ignored) are loaded into memory on the first search and again after
/// any change to the collection (from this process or another), then every vector is
/// scored against the query's by cosine similarity. See the crate docs for sizes and for
/// pgvector. Cheap to clone.
#[derive(Clone)]
pub struct Documents {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store,
    collection: String,
    embedder: Arc<dyn Embedder>,
    index: RwLock<Option<Arc<Index>>>,
}

/// A collection's vectors in memory: one flat array, `dims` floats per document.
struct Index {
    version: i64,
    dims: usize,
    ids: Vec<String>,
    vectors: Vec<f32>,
}

/// The stored JSON beside each vector.
#[derive(Serialize, Deserialize)]
struct Body {
    text: String,
    #[serde(default)]
    metadata: Value,
}

impl std::fmt::Debug for Documents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Documents")
            .field("collection", &self.inner.collection)
            .field("model", &self.inner.embedder.model())
            .finish_non_exhaustive()
    }
}

fn to_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn from_bytes(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// pgvector's text form of a vector: `[0.1,0.2,...]`.
fn vector_literal(v: &[f32]) -> String {
    let parts: Vec<String> = v.iter().map(f32::to_string).collect();
    format!("[{}]", parts.join(","))
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl Store {
    /// A retriever over the documents of `collection`, embedded with `embedder` (see
    /// [`Documents`]).
    pub fn documents(
        &self,
        collection: impl Into<String>,
        embedder: Arc<dyn Embedder>,
    ) -> Documents {
        Documents::new(self.clone(), collection.into(), embedder)
    }
}

impl Documents {
    pub(crate) fn new(store: Store, collection: String, embedder: Arc<dyn Embedder>) -> Self {
        Self {
            inner: Arc::new(Inner {
                store,
                collection,
                embedder,
                index: RwLock::new(None),
            }),
        }
    }

    /// Adds (or replaces) one document.
    ///
    /// # Errors
    /// As [`add_many`](Self::add_many).
    pub async fn add(
        &self,
        id: impl Into<String>,
        text: impl Into<String>,
        metadata: Value,
    ) -> Result<(), StoreError> {
        self.add_many(vec![(id.into(), text.into(), metadata)])
            .await
    }

    /// Embeds and stores documents `(id, text, metadata)`, replacing any with the same
    /// id, in one transaction.
    ///
    /// # Errors
    /// [`StoreError::Invalid`] for an empty id or one with a NUL byte;
    /// [`StoreError::Embedding`] when the embedder fails; as
    /// [`Store::stats`](crate::Store::stats) when the store cannot be written.
    pub async fn add_many(&self, docs: Vec<(String, String, Value)>) -> Result<(), StoreError> {
        let inner = &self.inner;
        for (id, _, _) in &docs {
            check_key("document id", id)?;
        }
        let texts: Vec<String> = docs.iter().map(|(_, t, _)| t.clone()).collect();
        let vectors = inner
            .embedder
            .embed(&texts)
            .await
            .map_err(|error| StoreError::Embedding { error })?;
        if vectors.len() != docs.len() {
            return Err(StoreError::invalid(format!(
                "the embedder returned {} vectors for {} texts",
                vectors.len(),
                docs.len()
            )));
        }
        let model = inner.embedder.model().to_owned();
        let now = db_ms(now_ms());
        let mut rows = Vec::with_capacity(docs.len());
        for ((id, text, metadata), mut vector) in docs.into_iter().zip(vectors) {
            normalize(&mut vector);
            let body = serde_json::to_string(&Body { text, metadata })
                .map_err(|e| StoreError::invalid(format!("cannot encode a document: {e}")))?;
            rows.push((id, i64::try_from(vector.len()).unwrap_or(0), vector, body));
        }
        let store = &inner.store;
        store.shared.ready().await?;
        let pgvector = store.shared.pgvector.load(Ordering::Relaxed);
        write_tx!(&store.shared, DB, tx => {
            for chunk in chunks(&rows) {
                let mut q = QueryBuilder::<DB>::new(
                    "INSERT INTO documents (collection, id, model, dims, embedding, body, updated_at_ms) ",
                );
                q.push_values(chunk, |mut b, (id, dims, vector, body)| {
                    b.push_bind(inner.collection.as_str())
                        .push_bind(id.as_str())
                        .push_bind(model.as_str())
                        .push_bind(*dims)
                        .push_bind(to_bytes(vector))
                        .push_bind(body.as_str())
                        .push_bind(now);
                });
                q.push(
                    " ON CONFLICT (collection, id) DO UPDATE SET model = excluded.model, \
                     dims = excluded.dims, embedding = excluded.embedding, body = excluded.body, \
                     updated_at_ms = excluded.updated_at_ms",
                );
                q.build().execute(&mut *tx).await.map_err(db_error)?;
            }
            if pgvector {
                for (id, _, vector, _) in &rows {
                    sqlx::query(
                        "UPDATE documents SET embedding_vec = $1::text::vector \
                         WHERE collection = $2 AND id = $3",
                    )
                    .bind(vector_literal(vector))
                    .bind(inner.collection.as_str())
                    .bind(id.as_str())
                    .execute(&mut *tx)
                    .await
                    .map_err(db_error)?;
                }
            }
            bump_version(&mut tx, &inner.collection).await?;
        })
    }

    /// Removes one document; `false` when there was none.
    ///
    /// # Errors
    /// As [`Store::stats`](crate::Store::stats) when the store cannot be written.
    pub async fn remove(&self, id: &str) -> Result<bool, StoreError> {
        let inner = &self.inner;
        inner.store.shared.ready().await?;
        write_tx!(&inner.store.shared, DB, tx => {
            let removed = sqlx::query("DELETE FROM documents WHERE collection = $1 AND id = $2")
                .bind(inner.collection.as_str())
                .bind(id)
                .execute(&mut *tx)
                .await
                .map_err(db_error)?
                .rows_affected();
            bump_version(&mut tx, &inner.collection).await?;
            removed > 0
        })
    }

    /// The number of documents in the collection (of any model).
    ///
    /// # Errors
    /// As [`Store::stats`](crate::Store::stats) when the store cannot be read.
    pub async fn len(&self) -> Result<u64, StoreError> {
        let inner = &self.inner;
        inner.store.shared.ready().await?;
        let n: i64 = on_read_pool!(&inner.store.shared.pools, pool, DB => {
            sqlx::query_scalar("SELECT COUNT(*) FROM documents WHERE collection = $1")
                .bind(inner.collection.as_str())
                .fetch_one(pool)
                .await
                .map_err(db_error)?
        });
        Ok(u64::try_from(n).unwrap_or(0))
    }

    /// Whether the collection has no documents.
    ///
    /// # Errors
    /// As [`Store::stats`](crate::Store::stats) when the store cannot be read.
    pub async fn is_empty(&self) -> Result<bool, StoreError> {
        Ok(self.len().await? == 0)
    }

    /// The `k` documents most similar to `query` (cosine similarity), most similar
    /// first.
    ///
    /// # Errors
    /// [`StoreError::Embedding`] when the embedder fails; as
    /// [`Store::stats`](crate::Store::stats) when the store cannot be read.
    pub async fn search(&self, query: &str, k: usize) -> Result<Vec<Retrieved>, StoreError> {
        let inner = &self.inner;
        if k == 0 {
            return Ok(Vec::new());
        }
        let mut vectors = inner
            .embedder
            .embed(&[query.to_owned()])
            .await
            .map_err(|error| StoreError::Embedding { error })?;
        let mut q = vectors
            .pop()
            .ok_or_else(|| StoreError::invalid("the embedder returned no vector"))?;
        normalize(&mut q);
        inner.store.shared.ready().await?;
        if inner.store.shared.pgvector.load(Ordering::Relaxed) {
            return self.search_pgvector(&q, k).await;
        }
        let index = self.index().await?;
        let mut scored: Vec<(f32, usize)> = if index.dims == q.len() {
            index
                .vectors
                .chunks_exact(index.dims)
                .enumerate()
                .map(|(i, v)| (v.iter().zip(&q).map(|(a, b)| a * b).sum::<f32>(), i))
                .collect()
        } else {
            Vec::new()
        };
        let by_score = |a: &(f32, usize), b: &(f32, usize)| b.0.total_cmp(&a.0);
        if scored.len() > k {
            scored.select_nth_unstable_by(k - 1, by_score);
            scored.truncate(k);
        }
        scored.sort_by(by_score);
        let ids: Vec<&str> = scored.iter().map(|(_, i)| index.ids[*i].as_str()).collect();
        let bodies = self.bodies(&ids).await?;
        Ok(scored
            .iter()
            .filter_map(|(score, i)| {
                let id = &index.ids[*i];
                bodies.iter().find(|(bid, _)| bid == id).map(|(_, body)| {
                    Retrieved::new(id.clone(), body.text.clone(), *score, body.metadata.clone())
                })
            })
            .collect())
    }

    /// The collection's in-memory index, reloaded when the stored version moved.
    async fn index(&self) -> Result<Arc<Index>, StoreError> {
        let inner = &self.inner;
        let version = self.version().await?;
        if let Some(index) = inner.index.read().await.as_ref()
            && index.version == version
        {
            return Ok(Arc::clone(index));
        }
        let mut slot = inner.index.write().await;
        if let Some(index) = slot.as_ref()
            && index.version == version
        {
            return Ok(Arc::clone(index));
        }
        let model = inner.embedder.model();
        let rows: Vec<(String, Vec<u8>)> = on_read_pool!(&inner.store.shared.pools, pool, DB => {
            let rows = sqlx::query(
                "SELECT id, embedding FROM documents WHERE collection = $1 AND model = $2 ORDER BY id",
            )
            .bind(inner.collection.as_str())
            .bind(model)
            .fetch_all(pool)
            .await
            .map_err(db_error)?;
            rows.iter()
                .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
                .collect::<Result<Vec<_>, sqlx::Error>>()
                .map_err(db_error)?
        });
        let dims = rows.first().map_or(0, |(_, b)| b.len() / 4);
        let mut ids = Vec::with_capacity(rows.len());
        let mut vectors = Vec::with_capacity(rows.len() * dims);
        for (id, bytes) in rows {
            if bytes.len() == dims * 4 {
                ids.push(id);
                vectors.extend(from_bytes(&bytes));
            }
        }
        let index = Arc::new(Index {
            version,
            dims,
            ids,
            vectors,
        });
        *slot = Some(Arc::clone(&index));
        Ok(index)
    }

    async fn version(&self) -> Result<i64, StoreError> {
        let inner = &self.inner;
        let v: Option<i64> = on_read_pool!(&inner.store.shared.pools, pool, DB => {
            sqlx::query_scalar("SELECT version FROM collections WHERE collection = $1")
                .bind(inner.collection.as_str())
                .fetch_optional(pool)
                .await
                .map_err(db_error)?
        });
        Ok(v.unwrap_or(0))
    }

    async fn bodies(&self, ids: &[&str]) -> Result<Vec<(String, Body)>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let inner = &self.inner;
        let rows: Vec<(String, String)> = on_read_pool!(&inner.store.shared.pools, pool, DB => {
            let mut q = QueryBuilder::<DB>::new("SELECT id, body FROM documents WHERE collection = ");
            q.push_bind(inner.collection.as_str()).push(" AND id IN (");
            let mut list = q.separated(", ");
            for id in ids {
                list.push_bind(*id);
            }
            q.push(")");
            let rows = q.build().fetch_all(pool).await.map_err(db_error)?;
            rows.iter()
                .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
                .collect::<Result<Vec<_>, sqlx::Error>>()
                .map_err(db_error)?
        });
        rows.into_iter()
            .map(|(id, body)| {
                serde_json::from_str(&body).map(|b| (id, b)).map_err(|e| {
                    StoreError::backend(format!("a stored document does not decode: {e}"))
                })
            })
            .collect()
    }

    /// PostgreSQL with pgvector: the search runs in the server (`<=>`, cosine distance).
    async fn search_pgvector(&self, q: &[f32], k: usize) -> Result<Vec<Retrieved>, StoreError> {
        let inner = &self.inner;
        let Pools::Postgres { pool, .. } = &inner.store.shared.pools else {
            return Ok(Vec::new());
        };
        let rows = sqlx::query(
            "SELECT id, body, (1 - (embedding_vec <=> $1::text::vector))::real AS score \
             FROM documents WHERE collection = $2 AND model = $3 AND embedding_vec IS NOT NULL \
             ORDER BY embedding_vec <=> $1::text::vector LIMIT $4",
        )
        .bind(vector_literal(q))
        .bind(inner.collection.as_str())
        .bind(inner.embedder.model())
        .bind(i64::try_from(k).unwrap_or(i64::MAX))
        .fetch_all(pool)
        .await
        .map_err(db_error)?;
        rows.iter()
            .map(|r| {
                let id: String = r.try_get(0).map_err(db_error)?;
                let body: String = r.try_get(1).map_err(db_error)?;
                let score: f32 = r.try_get(2).map_err(db_error)?;
                let body: Body = serde_json::from_str(&body).map_err(|e| {
                    StoreError::backend(format!("a stored document does not decode: {e}"))
                })?;
                Ok(Retrieved::new(id, body.text, score, body.metadata))
            })
            .collect()
    }
}

/// Marks the collection changed, so every process reloads its index.
async fn bump_version<'c, DB>(
    tx: &mut sqlx::Transaction<'c, DB>,
    collection: &str,
) -> Result<(), StoreError>
where
    DB: sqlx::Database,
    for<'q> &'q str: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> <DB as sqlx::Database>::Arguments<'q>: sqlx::IntoArguments<'q, DB>,
    for<'e> &'e mut <DB as sqlx::Database>::Connection: sqlx::Executor<'e, Database = DB>,
{
    sqlx::query::<DB>(
        "INSERT INTO collections (collection, version) VALUES ($1, 1) \
         ON CONFLICT (collection) DO UPDATE SET version = collections.version + 1",
    )
    .bind(collection)
    .execute(&mut **tx)
    .await
    .map_err(db_error)?;
    Ok(())
}

impl Retriever for Documents {
    fn retrieve<'a>(&'a self, query: &'a str, k: usize) -> StoreFuture<'a, Vec<Retrieved>> {
        Box::pin(self.search(query, k))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_round_trip_through_bytes() {
        let v = vec![0.25f32, -1.5, 3.0e-8];
        assert_eq!(from_bytes(&to_bytes(&v)), v);
        assert_eq!(vector_literal(&[0.5, -1.0]), "[0.5,-1]");
    }
}
