-- Argo CD health check of a ReplicationEngine (replication.reconciler.dev/v1alpha1): the verdict its engine (the
-- Spark driver) writes on its flows, the one drift gives: every flow running its wanted spec, every partition
-- copied, lag and record age within the SLOs. Wired as `resource.customizations.health.replication.reconciler.dev_
-- ReplicationEngine` in argocd-cm (deploy/argocd/argocd-cm.yaml); docs/gitops-controllers.md. Lua 5.1 (Argo CD's).
local hs = {}
if obj.status == nil or obj.status.conditions == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the engine to publish its verdict"
  return hs
end
local generation = obj.metadata and obj.metadata.generation
local observed = obj.status.observedGeneration
if generation ~= nil and observed ~= nil and observed < generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the engine to judge generation " .. tostring(generation) .. " (it judged " .. tostring(observed) .. ")"
  return hs
end
local conditions = {}
for _, condition in ipairs(obj.status.conditions) do
  conditions[condition.type] = condition
end
local function holds(kind)
  return conditions[kind] ~= nil and conditions[kind].status == "True"
end
local ready = conditions["Ready"]
hs.message = (ready ~= nil and ready.message) or obj.status.message or ""
if holds("Degraded") then
  hs.status = "Degraded"
elseif holds("Progressing") then
  hs.status = "Progressing"
elseif holds("Ready") then
  hs.status = "Healthy"
elseif ready ~= nil and ready.reason == "Suspended" then
  hs.status = "Suspended"
else
  hs.status = "Progressing"
end
return hs
