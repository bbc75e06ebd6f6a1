# A kg-mcp replica as a container image (docs/team/deploy.md, "Without systemd"): the command
# deploy/systemd/kg-mcp@.service runs, its settings from the environment:
#   docker build -t kg-mcp .
#   docker run --network host --env-file /etc/kg-mcp/kg-mcp.env -v /srv/kg-mcp:/srv/kg-mcp:ro \
#       -v /etc/kg-mcp:/etc/kg-mcp:ro kg-mcp --host 127.0.0.1 --port 8001
# No container engine runs on the machines this project is tested on: tests/packaging/test_dockerfile.py
# builds the wheel from exactly what the COPY lines below take, and checks the command; the image
# itself is not built there.
FROM python:3.11-slim
WORKDIR /src
COPY pyproject.toml README.md ./
COPY kg_mcp ./kg_mcp
COPY agents ./agents
COPY prompts ./prompts
RUN pip install --no-cache-dir . && rm -rf /src && useradd --system --no-create-home kg-mcp
USER kg-mcp
# An endpoint's name index is cached here (mount a volume to keep it across restarts).
ENV KG_MCP_CACHE=/tmp/kg-mcp-cache
EXPOSE 8000
# Where it listens is the run's to say (after the image name); by default every interface of the
# container's own network, to be published on the host's loopback only, behind nginx.
ENTRYPOINT ["kg-mcp", "serve", "--transport", "http"]
CMD ["--host", "0.0.0.0", "--port", "8000"]
