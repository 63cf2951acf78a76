//! Database URLs as messages and logs show them: without their password,
//! whether it sits in the user part (`postgres://u:pw@host/db`) or in a
//! query parameter (`?password=pw`, which PostgreSQL URLs accept too).

/// Query parameters that carry a secret.
const SECRET_PARAMS: [&str; 2] = ["password", "sslpassword"];

/// `url` with every password replaced by `***`.
pub(crate) fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (before_query, query) = rest
        .split_once('?')
        .map_or((rest, None), |(b, q)| (b, Some(q)));
    // The authority ends at the first '/': an '@' in the path is no user part.
    let (authority, path) = before_query
        .split_once('/')
        .map_or((before_query, None), |(a, p)| (a, Some(p)));
    let mut shown = format!("{scheme}://");
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            match userinfo.split_once(':') {
                Some((user, _)) => shown.push_str(&format!("{user}:***")),
                None => shown.push_str(userinfo),
            }
            shown.push('@');
            shown.push_str(host);
        }
        None => shown.push_str(authority),
    }
    if let Some(path) = path {
        shown.push('/');
        shown.push_str(path);
    }
    if let Some(query) = query {
        let params: Vec<String> = query
            .split('&')
            .map(|param| match param.split_once('=') {
                Some((key, _)) if SECRET_PARAMS.contains(&key.to_ascii_lowercase().as_str()) => {
                    format!("{key}=***")
                }
                _ => param.to_owned(),
            })
            .collect();
        shown.push('?');
        shown.push_str(&params.join("&"));
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn passwords_are_masked_and_the_rest_kept() {
        for (url, shown) in [
            (
                "postgres://u:secret@h:5432/db",
                "postgres://u:***@h:5432/db",
            ),
            ("postgres://u@h/db", "postgres://u@h/db"),
            ("postgres://h/db", "postgres://h/db"),
            ("postgres://u:secret@h", "postgres://u:***@h"),
            ("postgres://u:p@ss@h/db", "postgres://u:***@h/db"),
            (
                "postgres://h/db?sslmode=require&password=secret",
                "postgres://h/db?sslmode=require&password=***",
            ),
            (
                "postgresql://u:a@h/db?Password=b&sslpassword=c",
                "postgresql://u:***@h/db?Password=***&sslpassword=***",
            ),
            ("postgres://h/db@x", "postgres://h/db@x"),
            ("sqlite:mcq.sqlite", "sqlite:mcq.sqlite"),
        ] {
            assert_eq!(redact(url), shown, "{url}");
            assert!(!redact(url).contains("secret"), "{url}");
        }
    }
}
