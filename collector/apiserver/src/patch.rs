//! Patches: strategic merge, JSON merge, JSON patch and server-side apply.
