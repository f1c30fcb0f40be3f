//! Who may write a journal: only the runtime.

/// The runtime's permission to write its journal. Only the runtime makes one, and it lends it to its store for
/// each write: the writers of [`Store`](super::Store) and [`Durable`](super::Durable) take it, so code that
/// holds a store (an application, an operator's tool, a model's action) can read the journal and never rewrite
/// what happened. A store that wraps another one passes the pen it was lent on to the one inside; it cannot keep
/// it past the call.
///
/// ```compile_fail
/// // Outside the runtime a pen cannot be made, so a journal cannot be written.
/// let pen = agentry::store::JournalPen(());
/// ```
#[derive(Debug)]
pub struct JournalPen(());

/// The pen the runtime lends its stores.
pub(crate) const PEN: &JournalPen = &JournalPen(());
