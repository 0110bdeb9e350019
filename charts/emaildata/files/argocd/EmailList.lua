-- Argo CD health of an emaildata EmailList (lists.emaildata.io/v1alpha1).
-- Failed or Stalled: Degraded. Processed (a report list waiting for a
-- Purchase): Suspended. Results: Healthy. Anything else: Progressing.
local hs = {status = "Progressing", message = "Waiting for the emaildata manager"}
local function condition(t)
  if obj.status ~= nil and obj.status.conditions ~= nil then
    for _, c in ipairs(obj.status.conditions) do
      if c.type == t then
        return c
      end
    end
  end
  return nil
end
if obj.status == nil then
  return hs
end
local st = obj.status
local ready = condition("Ready")
local stalled = condition("Stalled")
local msg = ""
if ready ~= nil and ready.message ~= nil then
  msg = ready.message
end
if st.observedGeneration ~= nil and obj.metadata.generation ~= nil and st.observedGeneration < obj.metadata.generation then
  hs.message = "Waiting for the manager to observe generation " .. obj.metadata.generation
  return hs
end
if st.phase == "Failed" or (stalled ~= nil and stalled.status == "True") then
  hs.status = "Degraded"
  if stalled ~= nil and stalled.message ~= nil then
    msg = (stalled.reason or "") .. ": " .. stalled.message
  end
  hs.message = msg
  return hs
end
if st.phase == "Processed" then
  hs.status = "Suspended"
  hs.message = "Processed; results are held until a Purchase for the list is applied"
  return hs
end
if st.phase == "Results" and ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = msg
  if st.callback ~= nil and st.callback.state == "Failed" then
    hs.message = msg .. " (the completion callback failed: " .. (st.callback.lastError or "") .. ")"
  end
  return hs
end
if st.progressText ~= nil and st.progressText ~= "" then
  msg = msg .. " (" .. st.progressText .. ")"
end
if msg ~= "" then
  hs.message = msg
end
return hs
