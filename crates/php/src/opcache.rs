//! OPcache facts the lift and the lower share: its lock file's name and
//! the `getcwd` of a php-cli entry script named relative to the working
//! directory.

use crate::workload::{PhpOp, PhpOpKind, Via};
use statstorm_trace::op::{Op, OpKind};

/// The file name OPcache gives its lock file: `mkstemp` of
/// `<opcache.lockfile_path>/.ZendSem.XXXXXX` (php-src
/// ext/opcache/zend_shared_alloc.c `zend_shared_alloc_create_lock`,
/// `SEM_FILENAME_PREFIX`).
pub const OPCACHE_LOCK_PREFIX: &str = ".ZendSem.";

/// Whether the entry script of a php-cli request was named relative to the
/// working directory: PHP's own `getcwd` follows its open at once (measured:
/// `php tree.php` and `php ./tree.php` show it, `php /abs/tree.php` makes no
/// `getcwd` at all).
/// Returns that `getcwd`.
pub fn entry_getcwd(ops: &[PhpOp]) -> Option<&Op> {
    let i = ops
        .iter()
        .position(|o| matches!(o.kind, PhpOpKind::Compile { via: Via::Main, .. }))?;
    match ops.get(i + 1) {
        Some(PhpOp {
            kind: PhpOpKind::Raw { op },
            ..
        }) if op.kind == OpKind::Getcwd => Some(op),
        _ => None,
    }
}
