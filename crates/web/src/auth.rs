//! Who a request comes from: a fleet tenant proves itself with a token signed by its nkey
//! (the seed `vtnt fleet up` wrote for it, the key `vtnt fleet` commands use), which the
//! server checks against the tenant's public key. A token is
//! `vtnt1.<tenant>.<expiry, Unix seconds>.<ed25519 signature, hex>` over
//! `vtnt-serve\n<tenant>\n<expiry>`; `vtnt serve token` makes one. It travels as
//! `Authorization: Bearer <token>` or as the `vtnt_token` cookie `/login` sets (an
//! `EventSource` sends no headers). A server without tenants (a store of the command
//! line's own runs) serves tenant `local` to every client of its loopback address.

use std::path::Path;

use crate::{Error, Result};
use vtnt_store::Tenant;

/// A token's first word (its format's version).
const VERSION: &str = "vtnt1";
/// The longest a token may live.
pub const MAX_TTL_S: u64 = 30 * 24 * 3600;
/// The cookie that carries a browser's token.
pub const COOKIE: &str = "vtnt_token";

/// A tenant the server serves, and the public key its tokens are signed with.
#[derive(Debug, Clone)]
pub struct TenantKey {
    pub tenant: Tenant,
    pub public_key: String,
}

impl TenantKey {
    /// Tenant `name` with the nkey seed file `key` (its first seed: the tenant's user).
    pub fn from_file(name: &str, key: &Path) -> Result<TenantKey> {
        let tenant = Tenant::new(name)?;
        let seed = first_seed(key)?;
        let kp = nkeys::KeyPair::from_seed(&seed)
            .map_err(|e| Error::Key(format!("--key {}: {e}", key.display())))?;
        Ok(TenantKey {
            tenant,
            public_key: kp.public_key(),
        })
    }
}

fn first_seed(key: &Path) -> Result<String> {
    Ok(vtnt_fleet::auth::read_seeds(key)?.remove(0))
}

fn message(tenant: &str, expiry: u64) -> String {
    format!("vtnt-serve\n{tenant}\n{expiry}")
}

fn now_s() -> u64 {
    vtnt_fleet::now_us() / 1_000_000
}

/// A token for `tenant`, signed with the seed in `key`, valid for `ttl_s` seconds.
pub fn make_token(tenant: &str, key: &Path, ttl_s: u64) -> Result<String> {
    let tenant = Tenant::new(tenant)?;
    if !(1..=MAX_TTL_S).contains(&ttl_s) {
        return Err(Error::Invalid(format!(
            "--ttl: 1 second to {} days",
            MAX_TTL_S / 86400
        )));
    }
    let kp = nkeys::KeyPair::from_seed(&first_seed(key)?)
        .map_err(|e| Error::Key(format!("--key {}: {e}", key.display())))?;
    let expiry = now_s() + ttl_s;
    let sig = kp
        .sign(message(tenant.as_str(), expiry).as_bytes())
        .map_err(|e| {
            Error::Key(format!(
                "signing the token with --key {}: {e}",
                key.display()
            ))
        })?;
    Ok(format!("{VERSION}.{tenant}.{expiry}.{}", hex(&sig)))
}

/// The tenant `token` proves, among `keys`; the error says why not (no secret in it).
pub fn verify(token: &str, keys: &[TenantKey]) -> Result<Tenant, &'static str> {
    let mut w = token.split('.');
    let (Some(VERSION), Some(tenant), Some(expiry), Some(sig), None) =
        (w.next(), w.next(), w.next(), w.next(), w.next())
    else {
        return Err("not a vtnt serve token (`vtnt serve token` makes one)");
    };
    let key = keys
        .iter()
        .find(|k| k.tenant.as_str() == tenant)
        .ok_or("the token's tenant is not one this server serves")?;
    let expiry: u64 = expiry
        .parse()
        .map_err(|_| "the token's expiry is no number")?;
    let now = now_s();
    if expiry <= now {
        return Err("the token has expired");
    }
    if expiry > now + MAX_TTL_S {
        return Err("the token lives longer than a server accepts");
    }
    let sig = unhex(sig).ok_or("the token's signature is not hex")?;
    let kp = nkeys::KeyPair::from_public_key(&key.public_key).map_err(|_| "bad public key")?;
    kp.verify(message(tenant, expiry).as_bytes(), &sig)
        .map_err(|_| "the token's signature does not match the tenant's key")?;
    Ok(key.tenant.clone())
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) || s.len() > 256 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key_file(dir: &Path, name: &str) -> std::path::PathBuf {
        let f = dir.join(name);
        std::fs::write(&f, nkeys::KeyPair::new_user().seed().unwrap()).unwrap();
        f
    }

    #[test]
    fn tokens_prove_their_tenant_and_nothing_else() {
        let dir = std::env::temp_dir().join(format!("vtnt-web-auth-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (ka, kb) = (key_file(&dir, "a.nk"), key_file(&dir, "b.nk"));
        let keys = [
            TenantKey::from_file("a", &ka).unwrap(),
            TenantKey::from_file("b", &kb).unwrap(),
        ];
        let t = make_token("a", &ka, 60).unwrap();
        assert_eq!(verify(&t, &keys).unwrap().as_str(), "a");
        // b's key signing a token that names a
        let forged = make_token("a", &kb, 60).unwrap();
        assert!(verify(&forged, &keys)
            .unwrap_err()
            .contains("does not match"));
        // a token edited to name b
        let edited = t.replacen(".a.", ".b.", 1);
        assert!(verify(&edited, &keys).is_err());
        assert!(verify(&make_token("c", &ka, 60).unwrap(), &keys)
            .unwrap_err()
            .contains("not one this server serves"));
        assert!(verify("junk", &keys).is_err());
        assert!(make_token("a", &ka, MAX_TTL_S + 1).is_err());
        let mut w: Vec<&str> = t.split('.').collect();
        w[2] = "1";
        assert!(verify(&w.join("."), &keys).unwrap_err().contains("expired"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
