-- Argo CD health of an emaildata Purchase (lists.emaildata.io/v1alpha1).
-- Purchased: Healthy. Failed or Stalled: Degraded. Pending (the list is not
-- processed yet, or does not exist yet): Progressing.
local hs = {status = "Progressing", message = "Waiting for the emaildata manager"}
if obj.status == nil then
  return hs
end
local st = obj.status
local ready, stalled
if st.conditions ~= nil then
  for _, c in ipairs(st.conditions) do
    if c.type == "Ready" then ready = c end
    if c.type == "Stalled" then stalled = c end
  end
end
if st.observedGeneration ~= nil and obj.metadata.generation ~= nil and st.observedGeneration < obj.metadata.generation then
  hs.message = "Waiting for the manager to observe generation " .. obj.metadata.generation
  return hs
end
if st.phase == "Failed" or (stalled ~= nil and stalled.status == "True") then
  hs.status = "Degraded"
  if stalled ~= nil then
    hs.message = (stalled.reason or "") .. ": " .. (stalled.message or "")
  else
    hs.message = "The purchase failed"
  end
  return hs
end
if st.phase == "Purchased" and ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
end
if ready ~= nil and ready.message ~= nil then
  hs.message = ready.message
end
return hs
