// Package docs holds comm's user documentation (the Markdown files beside
// this one) and the test that keeps its links inside the repository.
package docs
