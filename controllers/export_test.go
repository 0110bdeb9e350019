package controllers

// NoPodsAfter is noPodsAfter, for the envtest suite (controllers_test),
// whose tests move a manager's fake clock past it.
const NoPodsAfter = noPodsAfter
