// Package controller is the event loop at the heart of a vswitchkit agent:
// the event vocabulary (Event, UpdateEvent, EventHandler, methods,
// directions, transaction types, errors, the built-in events) and a loop
// that runs registered handlers for one event at a time and commits one
// transaction per event to a [Southbound].
package controller
