package httpapi

// QuantilesOf exports quantilesOf to the tests.
var QuantilesOf = quantilesOf
