package registrar

import (
	"go.opentelemetry.io/otel/attribute"
)

// AttrBackendPartial marks an invocation span whose backend failed after
// changing, or possibly changing, the registry (a *PartialError).
const AttrBackendPartial = attribute.Key("registrar.backend_partial")
