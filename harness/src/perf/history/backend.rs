//! The two databases a history lives in — a SQLite file (one runner) or a PostgreSQL server
//! (many runners sharing one history) — behind the few operations the store needs: queries
//! with typed parameters and rows, statements, and the list of tables. The store's SQL is
//! written once with `?N` placeholders (turned into `$N` for PostgreSQL) in the subset both
//! dialects share (`INSERT ... RETURNING`, `ON CONFLICT ... DO UPDATE`); only the tables'
//! definitions differ ([`super::schema`]).
//!
//! Each database is a cargo feature: `sqlite` (on by default; SQLite compiled in, `bundled`)
//! and `postgres` (opt-in). A history in a database whose feature was left out is refused with
//! the feature to build with; the rest of conform works without either.

// Built with neither database, no `Backend` value can exist: its methods' bodies are
// unreachable and their arguments unused.
#![cfg_attr(
    not(any(feature = "sqlite", feature = "postgres")),
    allow(unused_variables, unreachable_code, dead_code)
)]

#[cfg(feature = "postgres")]
use std::collections::HashMap;

/// A parameter or column value. Each kind carries its own NULL, so a NULL parameter still has
/// the column's type (PostgreSQL checks it).
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Int(Option<i64>),
    Real(Option<f64>),
    Text(Option<String>),
}

impl Value {
    pub fn text(s: impl Into<String>) -> Value {
        Value::Text(Some(s.into()))
    }

    pub fn opt_text(s: Option<&str>) -> Value {
        Value::Text(s.map(str::to_string))
    }

    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(v) => *v,
            _ => None,
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Real(v) => *v,
            Value::Int(v) => v.map(|i| i as f64),
            _ => None,
        }
    }

    pub fn into_text(self) -> Option<String> {
        match self {
            Value::Text(v) => v,
            _ => None,
        }
    }
}

/// An error of either database.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[cfg(feature = "sqlite")]
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    #[cfg(feature = "postgres")]
    #[error(transparent)]
    Postgres(#[from] postgres::Error),
    #[error(
        "this conform was built without PostgreSQL support: a `postgres://` history needs the \
         `postgres` cargo feature (`cargo install --path cli --features postgres`); a \
         SQLite file works without it"
    )]
    PostgresNotBuilt,
    #[error(
        "this conform was built without SQLite support: a perf history file needs the `sqlite` \
         cargo feature (on by default; `cargo install --path cli` builds it)"
    )]
    SqliteNotBuilt,
    #[error("column {column} of `{sql}` has a type the history does not use")]
    UnexpectedType { sql: String, column: usize },
}

impl BackendError {
    /// Whether SQLite said the file is no database (or a damaged one).
    #[cfg(feature = "sqlite")]
    pub fn is_not_a_database(&self) -> bool {
        matches!(
            self,
            BackendError::Sqlite(e) if matches!(
                e.sqlite_error_code(),
                Some(rusqlite::ErrorCode::NotADatabase) | Some(rusqlite::ErrorCode::DatabaseCorrupt)
            )
        )
    }

    /// Without SQLite no error comes from a SQLite file.
    #[cfg(not(feature = "sqlite"))]
    pub fn is_not_a_database(&self) -> bool {
        false
    }
}

/// An open database.
pub enum Backend {
    #[cfg(feature = "sqlite")]
    Sqlite(rusqlite::Connection),
    #[cfg(feature = "postgres")]
    Postgres {
        client: Box<postgres::Client>,
        statements: HashMap<String, postgres::Statement>,
    },
    /// Built with neither database: no value of this type exists.
    #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
    Neither(std::convert::Infallible),
}

#[cfg(feature = "sqlite")]
impl rusqlite::ToSql for Value {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, Value as V};
        Ok(ToSqlOutput::Owned(match self {
            Value::Int(Some(v)) => V::Integer(*v),
            Value::Real(Some(v)) => V::Real(*v),
            Value::Text(Some(v)) => V::Text(v.clone()),
            _ => V::Null,
        }))
    }
}

/// `?N` placeholders as PostgreSQL's `$N`.
#[cfg(feature = "postgres")]
fn dollar_placeholders(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '?' && chars.peek().is_some_and(char::is_ascii_digit) {
            out.push('$');
        } else {
            out.push(c);
        }
    }
    out
}

impl Backend {
    /// Opens a SQLite file: read-only (it must exist), or read-write, created when absent.
    #[cfg(feature = "sqlite")]
    pub fn open_sqlite(path: &std::path::Path, writable: bool) -> Result<Backend, BackendError> {
        use rusqlite::OpenFlags;
        let flags = if writable {
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE
        } else {
            OpenFlags::SQLITE_OPEN_READ_ONLY
        };
        let conn =
            rusqlite::Connection::open_with_flags(path, flags | OpenFlags::SQLITE_OPEN_NO_MUTEX)?;
        Ok(Backend::Sqlite(conn))
    }

    /// Without the `sqlite` feature a history file is refused with what to do instead.
    #[cfg(not(feature = "sqlite"))]
    pub fn open_sqlite(_path: &std::path::Path, _writable: bool) -> Result<Backend, BackendError> {
        Err(BackendError::SqliteNotBuilt)
    }

    #[cfg(feature = "postgres")]
    pub fn connect_postgres(url: &str) -> Result<Backend, BackendError> {
        let client = postgres::Client::connect(url, postgres::NoTls)?;
        Ok(Backend::Postgres {
            client: Box::new(client),
            statements: HashMap::new(),
        })
    }

    /// Without the `postgres` feature a PostgreSQL URL is refused with what to do instead.
    #[cfg(not(feature = "postgres"))]
    pub fn connect_postgres(_url: &str) -> Result<Backend, BackendError> {
        Err(BackendError::PostgresNotBuilt)
    }

    /// The rows of a query, each as its column values.
    pub fn query(&mut self, sql: &str, params: &[Value]) -> Result<Vec<Vec<Value>>, BackendError> {
        match self {
            #[cfg(feature = "sqlite")]
            Backend::Sqlite(conn) => {
                let mut stmt = conn.prepare_cached(sql)?;
                let n = stmt.column_count();
                let rows = stmt.query_map(rusqlite::params_from_iter(params), |r| {
                    (0..n)
                        .map(|i| {
                            use rusqlite::types::ValueRef;
                            Ok(match r.get_ref(i)? {
                                ValueRef::Null => Value::Text(None),
                                ValueRef::Integer(v) => Value::Int(Some(v)),
                                ValueRef::Real(v) => Value::Real(Some(v)),
                                ValueRef::Text(t) => {
                                    Value::Text(Some(String::from_utf8_lossy(t).into_owned()))
                                }
                                ValueRef::Blob(b) => {
                                    Value::Text(Some(String::from_utf8_lossy(b).into_owned()))
                                }
                            })
                        })
                        .collect::<rusqlite::Result<Vec<Value>>>()
                })?;
                Ok(rows.collect::<rusqlite::Result<_>>()?)
            }
            #[cfg(feature = "postgres")]
            Backend::Postgres { client, statements } => {
                let stmt = match statements.get(sql) {
                    Some(s) => s.clone(),
                    None => {
                        let s = client.prepare(&dollar_placeholders(sql))?;
                        statements.insert(sql.to_string(), s.clone());
                        s
                    }
                };
                let args = pg_params(params);
                let refs: Vec<&(dyn postgres::types::ToSql + Sync)> =
                    args.iter().map(|b| b.as_ref()).collect();
                let rows = client.query(&stmt, &refs)?;
                rows.iter()
                    .map(|row| {
                        (0..row.len())
                            .map(|i| pg_value(row, i, sql))
                            .collect::<Result<Vec<Value>, BackendError>>()
                    })
                    .collect()
            }
            #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
            Backend::Neither(never) => match *never {},
        }
    }

    /// Runs a statement.
    pub fn execute(&mut self, sql: &str, params: &[Value]) -> Result<(), BackendError> {
        match self {
            #[cfg(feature = "sqlite")]
            Backend::Sqlite(conn) => {
                conn.prepare_cached(sql)?
                    .execute(rusqlite::params_from_iter(params))?;
                Ok(())
            }
            #[cfg(feature = "postgres")]
            Backend::Postgres { .. } => self.query(sql, params).map(drop),
            #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
            Backend::Neither(never) => match *never {},
        }
    }

    /// Runs several statements without parameters.
    pub fn batch(&mut self, sql: &str) -> Result<(), BackendError> {
        match self {
            #[cfg(feature = "sqlite")]
            Backend::Sqlite(conn) => Ok(conn.execute_batch(sql)?),
            #[cfg(feature = "postgres")]
            Backend::Postgres { client, .. } => Ok(client.batch_execute(sql)?),
            #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
            Backend::Neither(never) => match *never {},
        }
    }

    /// The names of the tables (of the current schema, for PostgreSQL).
    pub fn tables(&mut self) -> Result<Vec<String>, BackendError> {
        let sql = match self {
            #[cfg(feature = "sqlite")]
            Backend::Sqlite(_) => {
                "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
            }
            #[cfg(feature = "postgres")]
            Backend::Postgres { .. } => {
                "SELECT table_name::text FROM information_schema.tables \
                 WHERE table_schema = current_schema() ORDER BY 1"
            }
            #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
            Backend::Neither(never) => match *never {},
        };
        Ok(self
            .query(sql, &[])?
            .into_iter()
            .filter_map(|mut r| r.pop().and_then(Value::into_text))
            .collect())
    }

    pub fn is_sqlite(&self) -> bool {
        #[cfg(feature = "sqlite")]
        {
            matches!(self, Backend::Sqlite(_))
        }
        #[cfg(not(feature = "sqlite"))]
        {
            false
        }
    }
}

#[cfg(feature = "postgres")]
fn pg_params(params: &[Value]) -> Vec<Box<dyn postgres::types::ToSql + Sync>> {
    params
        .iter()
        .map(|v| -> Box<dyn postgres::types::ToSql + Sync> {
            match v {
                Value::Int(x) => Box::new(*x),
                Value::Real(x) => Box::new(*x),
                Value::Text(x) => Box::new(x.clone()),
            }
        })
        .collect()
}

#[cfg(feature = "postgres")]
fn pg_value(row: &postgres::Row, i: usize, sql: &str) -> Result<Value, BackendError> {
    use postgres::types::Type;
    let ty = row.columns()[i].type_();
    Ok(if *ty == Type::INT8 {
        Value::Int(row.try_get::<_, Option<i64>>(i)?)
    } else if *ty == Type::INT4 {
        Value::Int(row.try_get::<_, Option<i32>>(i)?.map(i64::from))
    } else if *ty == Type::FLOAT8 {
        Value::Real(row.try_get::<_, Option<f64>>(i)?)
    } else if *ty == Type::TEXT || *ty == Type::VARCHAR || *ty == Type::NAME {
        Value::Text(row.try_get::<_, Option<String>>(i)?)
    } else {
        return Err(BackendError::UnexpectedType {
            sql: sql.to_string(),
            column: i,
        });
    })
}

#[cfg(all(test, feature = "postgres"))]
mod tests {
    use super::*;

    #[test]
    fn placeholders_become_dollars_and_nothing_else_changes() {
        assert_eq!(
            dollar_placeholders("SELECT a FROM t WHERE b = ?1 AND c = ?12 AND d = '?'"),
            "SELECT a FROM t WHERE b = $1 AND c = $12 AND d = '?'"
        );
    }
}

#[cfg(all(test, not(feature = "sqlite")))]
mod without_sqlite {
    use super::*;

    #[test]
    fn a_history_file_is_refused_with_what_to_do() {
        let e = Backend::open_sqlite(std::path::Path::new("h.sqlite"), true)
            .err()
            .expect("no SQLite built in")
            .to_string();
        assert!(e.contains("the `sqlite`"), "{e}");
    }
}

#[cfg(all(test, not(feature = "postgres")))]
mod without_postgres {
    use super::*;

    #[test]
    fn a_postgres_url_is_refused_with_what_to_do() {
        let e = Backend::connect_postgres("postgres://x@y/z")
            .err()
            .expect("no client built in")
            .to_string();
        assert!(e.contains("the `postgres` cargo feature"), "{e}");
    }
}
