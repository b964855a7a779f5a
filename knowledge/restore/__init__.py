"""Restore: put objects back to the values audited changes found them in (`services`), through a
restorer per object type (`restorers`). It sits above entries and memories (it writes their rows
back, one of the named undo paths besides the one memory writer) and below the console and API
views of the audit trail that call it."""
