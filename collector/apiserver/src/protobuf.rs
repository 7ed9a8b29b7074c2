//! Kubernetes protobuf request bodies (`application/vnd.kubernetes.protobuf`), decoded to API JSON.
