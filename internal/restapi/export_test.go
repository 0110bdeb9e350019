package restapi

// TenantLabelValue is the tenant label's value for a tenant, for tests
// that make lists the way the API does.
var TenantLabelValue = tenantLabel
