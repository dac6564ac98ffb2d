// Package docs holds the operator documentation and its tests.
//
// The pages live in docs/en/ and docs/ko/ (the same file names in both) and
// are built into one site by mkdocs.yml at the repository root, with the
// mkdocs-static-i18n plugin's folder structure. The tests in this package
// keep the two languages in step with each other and with the code: the
// configuration keys, the exact configuration error messages, the wire
// identifiers, the metric names and the alert runbook anchors.
package docs
