//! The Kubernetes API server's write semantics, IO-free (as kube-core is apart from kube-client):
//! the transport (`apis::kube`) hands it request bodies and current objects and gets back the
//! object to store or the `Status` to answer with.
//!
//! - [`status`]: the `Status` failure an apiserver answers with (reason, code, details, causes).
//! - [`patch`]: the four patch types kubectl sends (strategic merge, JSON merge, JSON patch,
//!   server-side apply) and the field ownership (`managedFields`) they maintain.
//! - [`body`]: a request body (JSON, YAML or Kubernetes protobuf, by Content-Type) as API JSON.
//! - [`protobuf`]: request bodies kubectl sends as Kubernetes protobuf, decoded to API JSON.
//! - [`request_info`]: the verb and object a request is about (list, watch, get, patch ... of which
//!   resource), as the apiserver resolves them for authorization and audit.

pub mod body;
pub mod patch;
pub mod portforward;
pub mod protobuf;
pub mod remotecommand;
pub mod request_info;
pub mod spdy;
pub mod status;
