//! Who is calling, and whether they may: API keys (`Authorization: Bearer
//! mcq_…`), the role each route needs, the Host allow-list, and the rule
//! that keeps state-changing requests out of reach of other web sites.
//!
//! A server whose database holds no active key, started on a loopback
//! address (or with `--insecure-open`), is *open*: every request acts as
//! an admin of the default tenant, as in the quick start. Once a key
//! exists every request needs one — also if all keys are revoked later.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{MatchedPath, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use mcq_queue::{DEFAULT_TENANT, KeyRecord, Role, Scope, Store, TenantId, TenantLimits};

use crate::body::drain_refused;
use crate::extract::is_json;
use crate::problem::ApiError;

/// How long a key looked up in the database is trusted before it is read
/// again: a revoked key stops working within this time.
pub const KEY_CACHE_TTL: Duration = Duration::from_secs(2);
/// Most keys kept in the cache; past it the cache starts over.
const KEY_CACHE_CAPACITY: usize = 10_000;

/// The identity a request acts under, in its extensions (and its
/// response's, for the access log).
#[derive(Debug, Clone)]
pub struct Caller {
    /// The tenant whose work the request sees and creates.
    pub tenant: TenantId,
    /// The tenant's name.
    pub tenant_name: String,
    /// What the request may do.
    pub role: Role,
    /// The key's public id; `None` on an open server.
    pub key_id: Option<String>,
    /// The tenant's quotas.
    pub limits: TenantLimits,
}

impl Caller {
    /// Whose jobs and batches the caller may read and cancel.
    pub fn scope(&self) -> Scope {
        if self.role == Role::Admin {
            Scope::All
        } else {
            Scope::Tenant(self.tenant)
        }
    }

    fn of_key(key: &KeyRecord) -> Caller {
        Caller {
            tenant: key.tenant.id,
            tenant_name: key.tenant.name.clone(),
            role: key.role,
            key_id: Some(key.id.clone()),
            limits: key.tenant.limits,
        }
    }
}

/// What a route needs of its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Needs {
    /// Nothing: probes and the API description.
    Nobody,
    /// A key of this role or above.
    Role(Role),
}

/// The role a route needs: reads need `read`, writes `submit`, the
/// workers, the queue's depth and the metrics (every tenant's) `admin`;
/// probes and the OpenAPI document need nothing.
pub(crate) fn needs(method: &Method, route: &str) -> Needs {
    match route {
        "/healthz" | "/readyz" | "/openapi.json" => Needs::Nobody,
        "/v1/workers" | "/v1/queue" | "/metrics" => Needs::Role(Role::Admin),
        _ if method == Method::GET || method == Method::HEAD => Needs::Role(Role::Read),
        _ => Needs::Role(Role::Submit),
    }
}

/// The keys, cached for [`KEY_CACHE_TTL`], and the rules of this server.
#[derive(Debug, Clone)]
pub(crate) struct Gate {
    store: Store,
    /// Whether the server may run open when no key exists.
    open_without_keys: bool,
    /// Host names (without port) the server answers to; empty: any.
    allowed_hosts: Arc<Vec<String>>,
    /// Every (method, route) of [`crate::routes`]: another method on a
    /// route is answered 405 by the router, before any key is asked for.
    served: Arc<HashSet<(Method, &'static str)>>,
    /// Most bytes of a refused request's body read before answering.
    drain: u64,
    cache: Arc<Mutex<Cache>>,
}

#[derive(Debug, Default)]
struct Cache {
    keys: HashMap<String, (Instant, KeyRecord)>,
    /// Whether any key exists, and the default tenant's quotas.
    open: Option<(Instant, Option<TenantLimits>)>,
}

impl Gate {
    pub(crate) fn new(
        store: Store,
        open_without_keys: bool,
        allowed_hosts: Vec<String>,
        drain: u64,
    ) -> Gate {
        Gate {
            store,
            open_without_keys,
            drain,
            allowed_hosts: Arc::new(
                allowed_hosts
                    .into_iter()
                    .map(|h| h.to_ascii_lowercase())
                    .collect(),
            ),
            served: Arc::new(
                crate::routes()
                    .into_iter()
                    .map(|(method, path, _)| (method, path))
                    .collect(),
            ),
            cache: Arc::default(),
        }
    }

    /// The caller of a request with this `Authorization` header value.
    async fn caller(&self, authorization: Option<&str>) -> Result<Caller, ApiError> {
        let Some(value) = authorization else {
            return match self.open_limits().await? {
                Some(limits) => Ok(Caller {
                    tenant: DEFAULT_TENANT,
                    tenant_name: "default".into(),
                    role: Role::Admin,
                    key_id: None,
                    limits,
                }),
                None => Err(ApiError::Unauthorized {
                    detail: "this server needs an API key: send Authorization: Bearer <key> \
                             (an operator creates keys with `mcq keys create`)"
                        .into(),
                }),
            };
        };
        let invalid = || ApiError::Unauthorized {
            detail: "the API key is invalid or revoked".into(),
        };
        let token = bearer(value).ok_or_else(|| ApiError::Unauthorized {
            detail: "the Authorization header must be `Bearer <key>`".into(),
        })?;
        let presented = mcq_keys::parse(token).map_err(|_| invalid())?;
        let key = self.key(presented.id).await?.ok_or_else(invalid)?;
        if key.revoked_at.is_some() || !mcq_keys::verify(presented.secret, &key.secret_hash) {
            return Err(invalid());
        }
        Ok(Caller::of_key(&key))
    }

    /// A key by id, from the cache while fresh. Unknown ids are not
    /// cached, so made-up ids cannot fill the cache.
    async fn key(&self, id: &str) -> Result<Option<KeyRecord>, ApiError> {
        if let Some((at, key)) = self.lock().keys.get(id)
            && at.elapsed() < KEY_CACHE_TTL
        {
            return Ok(Some(key.clone()));
        }
        let key = self.store.key(id).await?;
        if let Some(key) = &key {
            let mut cache = self.lock();
            if cache.keys.len() >= KEY_CACHE_CAPACITY {
                cache.keys.clear();
            }
            cache
                .keys
                .insert(id.to_owned(), (Instant::now(), key.clone()));
        }
        Ok(key)
    }

    /// The default tenant's quotas when the server runs open now; `None`
    /// when requests need a key.
    async fn open_limits(&self) -> Result<Option<TenantLimits>, ApiError> {
        if !self.open_without_keys {
            return Ok(None);
        }
        if let Some((at, open)) = self.lock().open
            && at.elapsed() < KEY_CACHE_TTL
        {
            return Ok(open);
        }
        let open = if self.store.has_keys().await? {
            None
        } else {
            let tenants = self.store.tenants().await?;
            Some(
                tenants
                    .iter()
                    .find(|t| t.id == DEFAULT_TENANT)
                    .map(|t| t.limits)
                    .unwrap_or_default(),
            )
        };
        self.lock().open = Some((Instant::now(), open));
        Ok(open)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Cache> {
        // The cache holds no invariant a panic could break.
        self.cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether the request's Host is one this server answers to.
    fn host_allowed(&self, headers: &HeaderMap) -> bool {
        if self.allowed_hosts.is_empty() {
            return true;
        }
        let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else {
            return false;
        };
        let name = strip_port(host).to_ascii_lowercase();
        self.allowed_hosts.contains(&name)
    }
}

/// `host`, `host:port`, `[v6]` or `[v6]:port` without the port.
fn strip_port(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    }
}

/// The token of a `Bearer` authorization (the scheme is case-insensitive).
fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

/// Checks the Host, finds the caller and their role against the route's
/// need, and refuses cross-site writes; the caller goes into the request
/// (for handlers) and the response (for the access log). A refused
/// request's body is drained first (see `body`), so that a client writing
/// it all before reading receives the answer.
pub(crate) async fn authorize(State(gate): State<Gate>, request: Request, next: Next) -> Response {
    let (mut parts, body) = request.into_parts();
    let (caller, refusal) = match admit(&gate, &parts).await {
        Admission::Pass => return next.run(Request::from_parts(parts, body)).await,
        Admission::Caller(caller) => (Some(caller), None),
        Admission::Refused(caller, err) => (caller, Some(err)),
    };
    let mut response = match refusal {
        Some(err) => {
            drain_refused(&parts.headers, body, gate.drain).await;
            err.into_response()
        }
        None => {
            if let Some(caller) = &caller {
                parts.extensions.insert(caller.clone());
            }
            next.run(Request::from_parts(parts, body)).await
        }
    };
    if let Some(caller) = caller {
        response.extensions_mut().insert(caller);
    }
    response
}

/// What the gate makes of a request.
enum Admission {
    /// Not the gate's business: no route, another method (405), or a route
    /// that needs nobody.
    Pass,
    /// Served, acting as this caller.
    Caller(Caller),
    /// Refused, with the caller when one was found.
    Refused(Option<Caller>, ApiError),
}

async fn admit(gate: &Gate, request: &Parts) -> Admission {
    if !gate.host_allowed(&request.headers) {
        return Admission::Refused(None, ApiError::HostNotAllowed);
    }
    let Some(route) = request.extensions.get::<MatchedPath>() else {
        // No route: the fallback answers 404.
        return Admission::Pass;
    };
    let method = if request.method == Method::HEAD {
        Method::GET
    } else {
        request.method.clone()
    };
    if !gate.served.contains(&(method, route.as_str())) {
        return Admission::Pass;
    }
    let Needs::Role(role) = needs(&request.method, route.as_str()) else {
        return Admission::Pass;
    };
    let authorization = request
        .headers
        .get(header::AUTHORIZATION)
        .map(|v| v.to_str().unwrap_or_default());
    let caller = match gate.caller(authorization).await {
        Ok(caller) => caller,
        Err(err) => return Admission::Refused(None, err),
    };
    if caller.role < role {
        let err = ApiError::Forbidden {
            detail: format!(
                "this needs a key with the {role} role (or above); this key has {}",
                caller.role
            ),
        };
        return Admission::Refused(Some(caller), err);
    }
    if authorization.is_none()
        && writes(&request.method)
        && bodiless(route.as_str())
        && !is_json(&request.headers)
    {
        // A browser sends a cross-site POST without asking first only with
        // a form's content types; with JSON it must ask (CORS preflight),
        // and this server never agrees. Submissions are held to the same
        // rule by their body's extractor, which also drains the body.
        return Admission::Refused(Some(caller), ApiError::CrossSiteWrite);
    }
    Admission::Caller(caller)
}

/// Writes that take no body (the cancels): nothing else checks their
/// content type.
fn bodiless(route: &str) -> bool {
    route.ends_with("/cancel")
}

/// Methods that may change state.
fn writes(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_need_what_their_method_and_path_say() {
        let read = Needs::Role(Role::Read);
        let submit = Needs::Role(Role::Submit);
        for (method, route, need) in [
            (Method::GET, "/healthz", Needs::Nobody),
            (Method::GET, "/readyz", Needs::Nobody),
            (Method::GET, "/openapi.json", Needs::Nobody),
            (Method::GET, "/v1/jobs/{id}", read),
            (Method::GET, "/v1/batches/{id}/jobs", read),
            (Method::POST, "/v1/jobs", submit),
            (Method::POST, "/v1/batches/{id}/cancel", submit),
            (Method::GET, "/v1/workers", Needs::Role(Role::Admin)),
            (Method::GET, "/metrics", Needs::Role(Role::Admin)),
        ] {
            assert_eq!(needs(&method, route), need, "{method} {route}");
        }
    }

    #[test]
    fn bearer_tokens_and_host_names_are_read_leniently_but_exactly() {
        assert_eq!(bearer("Bearer abc"), Some("abc"));
        assert_eq!(bearer("bearer  abc "), Some("abc"));
        assert_eq!(bearer("Basic abc"), None);
        assert_eq!(bearer("Bearer "), None);
        assert_eq!(bearer("abc"), None);
        assert_eq!(strip_port("example.org:8080"), "example.org");
        assert_eq!(strip_port("example.org"), "example.org");
        assert_eq!(strip_port("[::1]:8080"), "::1");
        assert_eq!(strip_port("[::1]"), "::1");
    }
}
