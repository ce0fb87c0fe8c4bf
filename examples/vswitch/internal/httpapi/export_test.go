package httpapi

// QuantilesOf exports quantilesOf to the tests.
var QuantilesOf = quantilesOf

// JSONName and LowerCamel export jsonName and lowerCamel to the tests.
var (
	JSONName   = jsonName
	LowerCamel = lowerCamel
)
