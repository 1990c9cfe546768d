import { Client, httpJob, Publisher } from "@chime-sched/chime";

const hook = process.env.CHIME_HOOK ?? "http://127.0.0.1:9999/hook"; // `bin/chime echo` listens there
const api = new Client({ baseUrl: process.env.CHIME_URL ?? "http://127.0.0.1:8080", token: process.env.CHIME_TOKEN });
await api.putNamespace("acme");
await api.createJob("acme", { id: "hello-http", schedule: { in: "2s" }, callback: { url: hook, body: { hello: "chime" } } });

// The same, straight into Kafka (chime dev's embedded broker; its address
// and credential are in its state dir).
const kafka = Publisher.fromStateDir(process.env.CHIME_STATE_DIR ?? ".chime");
const receipt = await kafka.schedule(httpJob("acme", "hello-kafka", { url: hook, at: new Date(Date.now() + 2000), body: '{"hello": "kafka"}' }));
console.log("published", receipt);
await kafka.close();
console.log((await api.getJob("acme", "hello-http")).state);
