package claims

import (
	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/controller"
)

// Writer is where a renderer writes the changes a Table answers: the
// update transaction, the resync transaction, or nowhere (no transaction:
// the processor was called directly, or is reverting a failed event whose
// transaction the loop dropped; the renderer then only keeps its record up
// to date).
type Writer struct {
	Upd controller.UpdateOperations
	Res controller.ResyncOperations
}

// Put writes key's value into the transaction.
func (w Writer) Put(key string, v proto.Message) {
	switch {
	case w.Upd != nil:
		w.Upd.Put(key, v)
	case w.Res != nil:
		w.Res.Put(key, v)
	}
}

// Delete deletes key in an update transaction (a resync transaction holds
// only what is wanted).
func (w Writer) Delete(key string) {
	if w.Upd != nil {
		w.Upd.Delete(key)
	}
}
