-- Argo CD health of an emaildata Dataset (lists.emaildata.io/v1alpha1).
-- Loaded: Healthy (skipped malformed rows are named in the message).
-- Failed or Stalled: Degraded. Pending and Loading: Progressing.
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
    hs.message = "The import failed"
  end
  return hs
end
if ready ~= nil and ready.message ~= nil then
  hs.message = ready.message
end
if st.phase == "Loaded" and ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  if st.failed ~= nil and st.failed > 0 and string.find(hs.message, "malformed", 1, true) == nil then
    hs.message = hs.message .. " (" .. st.failed .. " malformed rows skipped)"
  end
end
return hs
